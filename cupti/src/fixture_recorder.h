// TRAINTIME_RECORD_FIXTURE=<dir> (the preload passes it in the capture options): records what CUPTI gave the adapter — the launch callbacks
// (domain, cbid, name, correlation id, kernel symbol, thread, and the launch context the adapter
// stored), graph-node creations and clones, and every activity buffer byte for byte with its
// valid size and the libcupti version — so tests/cupti/replay_fixture feeds the same input through
// the same decode and join code in CI, on machines without a GPU (DESIGN §8).
//
// Recording is a diagnostic mode: the launch callback takes a mutex and appends to a vector
// while it is on. Off (the default), nothing here runs.
//
// Layout of <dir>/pid<pid>/ (one per process, so every rank of a job can record):
//   fixture.json         schema "traintime-fixture/1": library, callbacks, graph nodes, buffer
//                        list, kernel names by record pointer, region paths, step count (a
//                        context's "category" is absent in fixtures recorded before launch
//                        contexts carried one: the replay takes it from "paths")
//   buffer-00000.bin ... the valid bytes of each completed buffer, in completion order
//   rank.json            the GPU part of the rank file the live capture computed from them
#pragma once

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "activity_pipeline.h"
#include "cupti_library.h"
#include "traintime/core/activity.h"
#include "traintime/core/category.h"
#include "traintime/core/rank_file.h"
#include "traintime/core/summaries.h"

namespace traintime::cupti {

// The JSON form of a LaunchContext, shared by the recorder and the replay. Without "category"
// the context's category is left kOther (the replay fills it from the fixture's paths).
nlohmann::json context_to_json(const core::LaunchContext& ctx);
core::LaunchContext context_from_json(const nlohmann::json& j);

class FixtureRecorder {
 public:
  // nullptr unless `root` names a directory (created, with pid<pid>/ in it).
  static std::unique_ptr<FixtureRecorder> open(const std::string& root);
  explicit FixtureRecorder(std::string dir) : dir_(std::move(dir)) {}

  void set_library(const CuptiLibrary& lib) { lib_ = &lib; }
  void on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb,
              const core::LaunchContext& ctx);
  // original_node_id != 0: a clone (ctx unused).
  void on_graph_node(uint64_t node_id, uint64_t original_node_id, const core::LaunchContext* ctx);
  // Processing thread, before the buffer is decoded.
  void on_buffer(const uint8_t* buffer, size_t valid_size);
  // Writes fixture.json. Called once, after the forced flush was processed, with no lock of the
  // adapter's held (path_name is a hook). The paths' categories are those their launch contexts
  // carried.
  void finish(uint64_t steps_completed, const PipelineStats& live,
              const std::function<std::string(core::PathId)>& path_name, const char* exit_reason);
  // rank.json: what the live capture made of the recorded input (the replay must reproduce it).
  void write_live_result(const core::RankFile& f);

 private:
  std::string dir_;
  const CuptiLibrary* lib_ = nullptr;
  std::mutex mu_;  // leaf lock
  nlohmann::json callbacks_ = nlohmann::json::array();
  nlohmann::json graph_nodes_ = nlohmann::json::array();
  nlohmann::json buffers_ = nlohmann::json::array();
  std::map<uint64_t, std::string> kernel_names_;  // record's name pointer -> name
  std::map<core::PathId, core::Category> paths_;  // the paths of the recorded contexts
  bool write_failed_ = false;
};

// The rank file of GPU work alone (no identity, no CPU regions beyond the paths' names, no NCCL
// call counts): what the live capture wrote as rank.json and what the replay must reproduce.
core::RankFile gpu_rank_file(const core::GpuSummary& gpu, uint64_t steps_completed,
                             const std::function<std::string(core::PathId)>& path_name);

}  // namespace traintime::cupti
