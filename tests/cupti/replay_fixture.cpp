// Replays a CUPTI fixture (cupti/src/fixture_recorder.h) through the adapter's own decode and
// join code (ActivityPipeline) into a GpuAggregator, and writes the GPU part of a rank file.
//
// usage: traintime_replay_fixture FIXTURE_DIR OUT_JSON [CUPTI_LIB]
//
// The buffers are walked with cuptiActivityGetNextRecord of a libcupti whose record layout must
// equal the recording's (CUPTI_LIB, else TRAINTIME_CUPTI_LIB, else the toolkit's). Launch
// contexts are stored into a CorrelationTable exactly as the launch callbacks stored them, graph
// nodes into a GraphNodeTable, and kernel names are mapped back from the recorded pointers.
// Exit codes: 0 written; 1 the fixture cannot be replayed; 2 usage.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "activity_pipeline.h"
#include "correlation_table.h"
#include "cupti_library.h"
#include "fixture_recorder.h"
#include "graph_node_table.h"
#include "traintime/core/gpu_aggregator.h"
#include "traintime/core/rank_file_json.h"

namespace tc = traintime::cupti;
namespace core = traintime::core;

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: traintime_replay_fixture FIXTURE_DIR OUT_JSON [CUPTI_LIB]\n";
    return 2;
  }
  const std::string dir = argv[1];
  nlohmann::json fx;
  {
    std::ifstream in(dir + "/fixture.json");
    if (!in) {
      std::cerr << "replay: cannot read " << dir << "/fixture.json\n";
      return 1;
    }
    in >> fx;
  }
  const uint32_t version = fx.at("cupti_version").get<uint32_t>();
  std::string why;
  const tc::RecordLayout recorded = tc::layout_for_version(version, &why);
  if (recorded == tc::RecordLayout::kUnknown) {
    std::cerr << "replay: the fixture's " << why << '\n';
    return 1;
  }
  tc::CuptiLibrary lib;
  const char* env = std::getenv("TRAINTIME_CUPTI_LIB");
  const std::string lib_path = argc == 4 ? argv[3] : (env ? env : "");
  if (!lib.load(lib_path, &why)) {
    std::cerr << "replay: " << why << '\n';
    return 1;
  }
  if (lib.layout() != recorded) {
    std::cerr << "replay: " << lib.path() << " decodes " << tc::layout_name(lib.layout())
              << " but the fixture was recorded as " << tc::layout_name(recorded) << '\n';
    return 1;
  }

  std::map<core::PathId, std::pair<std::string, core::Category>> paths;
  for (const auto& p : fx.at("paths")) {
    const auto category = core::category_from_name(p.at("category").get<std::string>());
    paths[p.at("id").get<core::PathId>()] = {p.at("path").get<std::string>(),
                                             category.value_or(core::Category::kOther)};
  }
  // A context as the launch callback stored it, category included; a fixture recorded before
  // contexts carried their category gives it in its paths.
  const auto context = [&](const nlohmann::json& j) {
    core::LaunchContext ctx = tc::context_from_json(j);
    if (!j.contains("category")) {
      auto it = paths.find(ctx.path);
      ctx.category = it == paths.end() ? core::Category::kOther : it->second.second;
    }
    return ctx;
  };
  tc::CorrelationTable launches(1u << 18);
  for (const auto& cb : fx.at("callbacks"))
    launches.store(cb.at("correlation_id").get<uint32_t>(), context(cb.at("context")));
  tc::GraphNodeTable graph_nodes(std::size_t{1} << 18);
  for (const auto& node : fx.at("graph_nodes")) {
    const uint64_t original = node.at("original_node_id").get<uint64_t>();
    if (original != 0)
      graph_nodes.cloned(node.at("node_id").get<uint64_t>(), original);
    else
      graph_nodes.created(node.at("node_id").get<uint64_t>(), context(node.at("context")));
  }
  std::map<uint64_t, std::string> names;
  for (const auto& [ptr, name] : fx.at("kernel_names").items()) names[std::stoull(ptr)] = name.get<std::string>();

  core::GpuAggregator aggregator;
  tc::ActivityPipeline pipeline(
      lib, launches, graph_nodes, aggregator, [&](const char* ptr) -> std::string_view {
        auto it = names.find(reinterpret_cast<uint64_t>(ptr));
        return it == names.end() ? std::string_view() : std::string_view(it->second);
      });
  for (const auto& b : fx.at("buffers")) {
    const std::string file = dir + "/" + b.at("file").get<std::string>();
    std::ifstream in(file, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() != b.at("valid_size").get<size_t>()) {
      std::cerr << "replay: " << file << " has " << bytes.size() << " bytes, recorded "
                << b.at("valid_size") << '\n';
      return 1;
    }
    // CUPTI buffers are 8-byte aligned; so is a vector of uint64_t.
    std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(aligned.data()));
    pipeline.process(reinterpret_cast<uint8_t*>(aligned.data()), bytes.size());
  }

  const uint64_t steps = fx.at("steps_completed").get<uint64_t>();
  core::GpuSummary gpu = aggregator.summary(steps);
  gpu.capture = core::GpuCapture::kCupti;
  gpu.capture_reason =
      "replay of " + dir + " (recorded with " + fx.at("cupti_path").get<std::string>() + ")";
  pipeline.count_into(gpu.section);
  const core::RankFile f = tc::gpu_rank_file(gpu, steps, [&](core::PathId p) {
    auto it = paths.find(p);
    return it == paths.end() ? std::string() : it->second.first;
  });
  nlohmann::json out = core::rank_file_to_json(f);
  out["replay"] = {{"buffers", pipeline.stats().buffers},
                   {"activities", pipeline.stats().activities},
                   {"missing_context", pipeline.stats().missing_context},
                   {"graph_node_context", pipeline.stats().graph_node_context},
                   {"joined_runtime", pipeline.stats().joined_runtime},
                   {"joined_correlation", pipeline.stats().joined_correlation},
                   {"live", fx.at("live")}};
  std::ofstream o(argv[2]);
  o << out.dump(1) << '\n';
  if (!o) {
    std::cerr << "replay: cannot write " << argv[2] << '\n';
    return 1;
  }
  return 0;
}
