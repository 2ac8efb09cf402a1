// SIMULATION: sim_train's ground truth (see truth.h).
#include "truth.h"

#include <algorithm>

namespace sim_train {

uint64_t union_ns(std::vector<std::pair<uint64_t, uint64_t>> iv) {
  std::sort(iv.begin(), iv.end());
  uint64_t total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [s, e] : iv) {
    if (e <= s) continue;
    if (!open || s > cur_end) {
      if (open) total += cur_end - cur_start;
      cur_start = s;
      cur_end = e;
      open = true;
    } else {
      cur_end = std::max(cur_end, e);
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

namespace {

using Intervals = std::vector<std::pair<uint64_t, uint64_t>>;

bool is_compute(Cat c) { return c != Cat::kComm && c != Cat::kIo; }

const char* direction(uint8_t copy_kind) {
  switch (copy_kind) {
    case 1: return "HtoD";
    case 2: return "DtoH";
    case 8: return "DtoD";
    case 10: return "PtoP";
    default: return nullptr;  // other kinds (HtoH...) are not reported by direction
  }
}

}  // namespace

nlohmann::json compute_truth(const TruthInput& in) {
  using nlohmann::json;
  // Group by step (the final partial step, if any, has index == in.steps).
  std::map<uint64_t, std::vector<const Activity*>> by_step;
  for (const auto& a : in.activities) by_step[a.step].push_back(&a);

  struct CatTotals { uint64_t busy = 0, sum = 0, count = 0; };
  CatTotals cats[kCatCount];
  uint64_t busy = 0, compute = 0, comm = 0, overlapped = 0, exposed = 0, io = 0, idle = 0;

  json steps_detail = json::array();  // per step, for the live metrics (steps.by_step)
  for (const auto& [step, acts] : by_step) {
    Intervals all, comp, com, inout, per_cat[kCatCount];
    uint64_t first = UINT64_MAX, last = 0;
    for (const Activity* a : acts) {
      const auto iv = std::make_pair(a->start, a->end);
      all.push_back(iv);
      per_cat[static_cast<int>(a->cat)].push_back(iv);
      if (is_compute(a->cat)) comp.push_back(iv);
      if (a->cat == Cat::kComm) com.push_back(iv);
      if (a->cat == Cat::kIo) inout.push_back(iv);
      first = std::min(first, a->start);
      last = std::max(last, a->end);
      CatTotals& t = cats[static_cast<int>(a->cat)];
      t.sum += a->end - a->start;
      t.count += 1;
    }
    json step_cats = json::object();
    for (int c = 0; c < kCatCount; ++c) {
      const uint64_t u = union_ns(per_cat[c]);
      cats[c].busy += u;
      step_cats[cat_name(static_cast<Cat>(c))] = u;
    }
    const uint64_t u_all = union_ns(all), u_comp = union_ns(comp), u_comm = union_ns(com);
    Intervals comm_or_comp = comp;
    comm_or_comp.insert(comm_or_comp.end(), com.begin(), com.end());
    const uint64_t both = u_comp + u_comm - union_ns(comm_or_comp);  // |comm ∩ compute|
    const uint64_t u_io = union_ns(inout);
    busy += u_all;
    compute += u_comp;
    comm += u_comm;
    overlapped += both;
    exposed += u_comm - both;
    io += u_io;
    idle += (last - first) - u_all;
    steps_detail.push_back({{"index", step}, {"span_ns", last - first}, {"gpu_busy_ns", u_all},
                            {"compute_ns", u_comp}, {"comm_ns", u_comm},
                            {"exposed_comm_ns", u_comm - both}, {"io_ns", u_io},
                            {"idle_ns", (last - first) - u_all}, {"busy_ns_by_category", step_cats}});
  }

  json out;
  out["schema"] = "simgpu-truth/1";
  out["simulated"] = true;
  out["rank"] = in.rank;
  out["world_size"] = in.world_size;
  out["options"] = in.options;
  if (!in.profiler_windows.empty()) out["profiler_windows"] = in.profiler_windows;
  json jc = json::object();
  for (int c = 0; c < kCatCount; ++c)
    jc[cat_name(static_cast<Cat>(c))] = {{"gpu_busy_ns", cats[c].busy}, {"gpu_sum_ns", cats[c].sum}, {"count", cats[c].count}};
  out["categories"] = jc;
  out["steps"] = {{"count", in.steps},
                  {"source", in.steps_source},
                  {"partial_final_step", by_step.count(in.steps) > 0},
                  {"totals", {{"gpu_busy_ns", busy}, {"compute_ns", compute}, {"comm_ns", comm},
                              {"comm_overlapped_ns", overlapped}, {"exposed_comm_ns", exposed},
                              {"io_ns", io}, {"idle_ns", idle}}},
                  {"by_step", std::move(steps_detail)}};

  // comm rows per (op, comm_size): calls and bytes from the calls, gpu_ns from the work.
  struct Row { uint64_t calls = 0, bytes = 0, gpu_ns = 0; };
  std::map<std::pair<std::string, int>, Row> rows;
  std::map<std::string, int> size_of_op;
  for (const auto& c : in.comm_calls) {
    Row& r = rows[{c.op, c.comm_size}];
    r.calls += 1;
    r.bytes += c.bytes;
    size_of_op[c.op] = c.comm_size;
  }
  for (const auto& a : in.activities) {
    if (a.cat != Cat::kComm) continue;
    rows[{a.comm_op, size_of_op.count(a.comm_op) ? size_of_op[a.comm_op] : in.world_size}].gpu_ns += a.end - a.start;
  }
  json jrows = json::array();
  for (const auto& [key, r] : rows)
    jrows.push_back({{"op", key.first}, {"comm_size", key.second}, {"calls", r.calls}, {"bytes", r.bytes}, {"gpu_ns", r.gpu_ns}});
  out["comm"] = jrows;

  std::map<std::string, Row> copies;
  for (const auto& a : in.activities) {
    if (a.kind != 2) continue;  // SIMGPU_MEMCPY
    const char* d = direction(a.copy_kind);
    if (!d) continue;
    Row& r = copies[d];
    r.calls += 1;
    r.bytes += a.bytes;
    r.gpu_ns += a.end - a.start;
  }
  json jm = json::object();
  for (const auto& [d, r] : copies) jm[d] = {{"count", r.calls}, {"bytes", r.bytes}, {"gpu_ns", r.gpu_ns}};
  out["memcpy"] = jm;

  // Exclusive region rows (work launched directly under the path), comm work excluded.
  struct Reg { Cat cat = Cat::kOther; uint64_t kernels = 0, activities = 0, sum = 0; Intervals work; };
  std::map<std::string, Reg> regions;
  for (const auto& a : in.activities) {
    if (a.cat == Cat::kComm || a.path.empty()) continue;
    Reg& r = regions[a.path];
    r.cat = a.cat;
    r.activities += 1;
    if (a.kind == 1) r.kernels += 1;  // SIMGPU_KERNEL
    r.sum += a.end - a.start;
    r.work.emplace_back(a.start, a.end);
  }
  json jr = json::array();
  for (auto& [path, r] : regions)
    jr.push_back({{"path", path}, {"category", cat_name(r.cat)}, {"kernels", r.kernels},
                  {"activities", r.activities}, {"gpu_sum_ns", r.sum},
                  {"gpu_busy_ns", union_ns(std::move(r.work))}});
  out["regions"] = jr;
  if (in.memory_truth) out["memory"] = memory_truth(in.memory_ops, in.steps);
  return out;
}

nlohmann::json memory_truth(const std::vector<MemoryOp>& ops, uint64_t steps) {
  using nlohmann::json;
  json by_step = json::array();
  int64_t in_use = 0, run_peak = 0;
  size_t i = 0;
  for (uint64_t step = 0; step <= steps; ++step) {
    int64_t peak = in_use;  // a step starts with what the previous one left
    for (; i < ops.size() && ops[i].step == step; ++i) {
      in_use += ops[i].bytes;
      peak = std::max(peak, in_use);
    }
    run_peak = std::max(run_peak, peak);
    if (step < steps) by_step.push_back({{"index", step}, {"peak_bytes", peak}, {"in_use_bytes", in_use}});
  }
  return {{"device", 0}, {"peak_bytes", run_peak}, {"in_use_bytes", in_use}, {"by_step", by_step}};
}

}  // namespace sim_train
