#include "fixture_recorder.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "activity_decoder.h"
#include "traintime/core/rank_file_builder.h"
#include "traintime/support/log.h"
#include "traintime/core/rank_file_json.h"

namespace traintime::cupti {

nlohmann::json context_to_json(const core::LaunchContext& ctx) {
  return {{"path", ctx.path},         {"step", ctx.step},
          {"entry", ctx.entry},       {"comm_op", static_cast<int>(ctx.comm.op)},
          {"comm_id", ctx.comm.comm_id},   {"comm_seq", ctx.comm.seq},
          {"comm_bytes", ctx.comm.bytes}, {"comm_group", ctx.comm.group_id},
          {"comm_captured", ctx.comm.captured},
          {"category", std::string(core::category_name(ctx.category))}};
}

core::LaunchContext context_from_json(const nlohmann::json& j) {
  core::LaunchContext ctx;
  ctx.path = j.at("path").get<core::PathId>();
  ctx.step = j.at("step").get<uint32_t>();
  ctx.entry = j.at("entry").get<uint64_t>();
  ctx.comm.op = static_cast<core::CommOp>(j.at("comm_op").get<int>());
  ctx.comm.comm_id = j.at("comm_id").get<uint32_t>();
  ctx.comm.seq = j.at("comm_seq").get<uint64_t>();
  ctx.comm.bytes = j.at("comm_bytes").get<uint64_t>();
  ctx.comm.group_id = j.at("comm_group").get<uint64_t>();
  ctx.comm.captured = j.at("comm_captured").get<bool>();
  if (auto c = j.find("category"); c != j.end())
    ctx.category = core::category_from_name(c->get<std::string>()).value_or(core::Category::kOther);
  return ctx;
}

std::unique_ptr<FixtureRecorder> FixtureRecorder::open(const std::string& root) {
  if (root.empty()) return nullptr;
  // One sub-directory per process: the ranks of one job may share the variable.
  const std::string dir = root + "/pid" + std::to_string(getpid());
  if ((mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) ||
      (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)) {
    support::log_warn("TRAINTIME_RECORD_FIXTURE={}: cannot create {}", root, dir);
    return nullptr;
  }
  return std::make_unique<FixtureRecorder>(dir);
}

void FixtureRecorder::on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                             const CUpti_CallbackData* cb, const core::LaunchContext& ctx) {
  const int saved_errno = errno;
  nlohmann::json row = {{"domain", static_cast<int>(domain)},
                        {"cbid", cbid},
                        {"name", cb->functionName ? cb->functionName : ""},
                        {"correlation_id", cb->correlationId},
                        {"symbol", cb->symbolName ? cb->symbolName : ""},
                        {"thread", static_cast<int64_t>(syscall(SYS_gettid))},
                        {"context", context_to_json(ctx)}};
  {
    std::lock_guard<std::mutex> lock(mu_);
    callbacks_.push_back(std::move(row));
    paths_.emplace(ctx.path, ctx.category);
  }
  errno = saved_errno;
}

void FixtureRecorder::on_graph_node(uint64_t node_id, uint64_t original_node_id,
                                    const core::LaunchContext* ctx) {
  nlohmann::json row = {{"node_id", node_id}, {"original_node_id", original_node_id}};
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx) {
    row["context"] = context_to_json(*ctx);
    paths_.emplace(ctx->path, ctx->category);
  }
  graph_nodes_.push_back(std::move(row));
}

void FixtureRecorder::on_buffer(const uint8_t* buffer, size_t valid_size) {
  std::lock_guard<std::mutex> lock(mu_);
  char name[32];
  std::snprintf(name, sizeof name, "buffer-%05zu.bin", buffers_.size());
  std::ofstream out(dir_ + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(buffer), static_cast<std::streamsize>(valid_size));
  if (!out) write_failed_ = true;
  buffers_.push_back({{"file", name}, {"valid_size", valid_size}});
  // Kernel names are pointers into libcupti's memory: keep the strings for the replay. The
  // buffer is walked on a copy, so the decode below cannot disturb the live one.
  if (!lib_) return;
  std::vector<uint8_t> copy(buffer, buffer + valid_size);
  decode_buffer(*lib_, copy.data(), copy.size(), [&](const DecodedActivity& d) {
    if (d.name_ptr) kernel_names_.emplace(reinterpret_cast<uint64_t>(d.name_ptr), d.name_ptr);
  });
}

void FixtureRecorder::finish(uint64_t steps_completed, const PipelineStats& live,
                             const std::function<std::string(core::PathId)>& path_name,
                             const char* exit_reason) {
  std::map<core::PathId, core::Category> recorded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    recorded = paths_;
  }
  nlohmann::json paths = nlohmann::json::array();
  for (const auto& [p, category] : recorded) {  // path_name is a hook: asked with mu_ released
    if (p == core::kNoPath) continue;
    paths.push_back({{"id", p},
                     {"path", path_name(p)},
                     {"category", std::string(core::category_name(category))}});
  }
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json names = nlohmann::json::object();
  for (const auto& [ptr, name] : kernel_names_) names[std::to_string(ptr)] = name;
  nlohmann::json j = {
      {"schema", "traintime-fixture/1"},
      {"cupti_path", lib_ ? lib_->path() : ""},
      {"cupti_version", lib_ ? lib_->version() : 0},
      {"layout", lib_ ? layout_name(lib_->layout()) : "unknown"},
      {"pid", static_cast<int64_t>(getpid())},
      {"exit_reason", exit_reason ? exit_reason : ""},
      {"steps_completed", steps_completed},
      {"live", {{"buffers", live.buffers},
                {"activities", live.activities},
                {"missing_context", live.missing_context},
                {"graph_node_context", live.graph_node_context}}},
      {"callbacks", callbacks_},
      {"graph_nodes", graph_nodes_},
      {"buffers", buffers_},
      {"kernel_names", names},
      {"paths", paths},
  };
  std::ofstream out(dir_ + "/fixture.json");
  out << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';  // kernel names need not be UTF-8
  if (!out || write_failed_)
    support::log_warn("TRAINTIME_RECORD_FIXTURE: could not write every file in {}", dir_);
}

}  // namespace traintime::cupti

namespace traintime::cupti {

void FixtureRecorder::write_live_result(const core::RankFile& f) {
  std::string error;
  if (!core::write_rank_file(dir_ + "/rank.json", f, &error, core::WriteMode::kReplace))
    support::log_warn("TRAINTIME_RECORD_FIXTURE: {}", error);
}

core::RankFile gpu_rank_file(const core::GpuSummary& gpu, uint64_t steps_completed,
                             const std::function<std::string(core::PathId)>& path_name) {
  core::CpuSummary cpu;
  for (const core::GpuSummary::Region& r : gpu.regions) {
    if (r.path >= cpu.path_names.size()) cpu.path_names.resize(r.path + 1);
    cpu.path_names[r.path] = path_name(r.path);
  }
  cpu.steps.count = steps_completed;
  return core::build_rank_file(core::Identity{}, cpu, gpu, core::CommSummary{});
}

}  // namespace traintime::cupti
