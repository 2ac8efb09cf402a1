// SIMULATION tooling: sim_replay's plan (replay_plan.h).
#include "replay_plan.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>
#include <unordered_map>

namespace sim_replay {
namespace {

// ncclDataType_t and ncclRedOp_t values (nccl.h); the plan needs no NCCL header.
enum : int { kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5, kFloat16 = 6,
             kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11 };
enum : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// "void ncclKernel_..." / "ncclDevKernel_...(args)" -> "ncclKernel_..." without the arguments.
std::string nccl_identifier(const std::string& name) {
  std::string s = name;
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  const size_t paren = s.find('(');
  if (paren != std::string::npos) s.resize(paren);
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return out;
}

// A type token of an NCCL kernel name ("float", "f32", "int8_t", "__nv_bfloat16", ...).
bool kernel_type(const std::string& tok, int* type) {
  static const std::pair<const char*, int> types[] = {
      {"int8_t", kInt8},     {"i8", kInt8},        {"uint8_t", kUint8},    {"u8", kUint8},
      {"int32_t", kInt32},   {"i32", kInt32},      {"uint32_t", kUint32},  {"u32", kUint32},
      {"int64_t", kInt64},   {"i64", kInt64},      {"uint64_t", kUint64},  {"u64", kUint64},
      {"half", kFloat16},    {"f16", kFloat16},    {"float", kFloat32},    {"f32", kFloat32},
      {"double", kFloat64},  {"f64", kFloat64},    {"__nv_bfloat16", kBfloat16}, {"bf16", kBfloat16},
      {"f8e4m3", kFloat8e4m3}, {"__nv_fp8_e4m3", kFloat8e4m3}, {"f8e5m2", kFloat8e5m2},
      {"__nv_fp8_e5m2", kFloat8e5m2}};
  for (const auto& [text, t] : types)
    if (tok == text) return *type = t, true;
  return false;
}

bool kernel_redop(const std::string& tok, int* op) {
  if (tok == "Sum") return *op = kSum, true;
  if (tok == "Prod") return *op = kProd, true;
  if (tok == "MinMax" || tok == "Max") return *op = kMax, true;
  if (tok == "Min") return *op = kMin, true;
  if (tok == "PreMulSum" || tok == "SumPostDiv" || tok == "Avg") return *op = kAvg, true;
  return false;
}

// PyTorch's dtype names (c10::ScalarType) -> ncclDataType_t.
bool torch_dtype(const std::string& dtype, int* type) {
  static const std::pair<const char*, int> types[] = {
      {"float", kFloat32}, {"double", kFloat64}, {"half", kFloat16}, {"bfloat16", kBfloat16},
      {"int", kInt32},     {"long", kInt64},     {"char", kInt8},    {"byte", kUint8},
      {"bool", kUint8},    {"uint32", kUint32},  {"uint64", kUint64}, {"float8_e4m3fn", kFloat8e4m3},
      {"float8_e5m2", kFloat8e5m2}};
  const std::string d = lower(dtype);
  for (const auto& [text, t] : types)
    if (d == text) return *type = t, true;
  return false;
}

// CUPTI's runtime callback ids of CUDA 13's <<<>>> launch (cupti_runtime_cbid.h), which Kineto's
// name table predates.
constexpr uint32_t kCbidNvccLaunch = 505, kCbidNvccLaunchPtsz = 506;

LaunchApi launch_api(const ApiCall& c, std::map<std::string, uint64_t>& subs, uint64_t& substituted) {
  const std::string& api = c.name;
  const bool driver = c.driver;
  if (api == "INVALID" && c.cbid && (*c.cbid == kCbidNvccLaunch || *c.cbid == kCbidNvccLaunchPtsz)) {
    if (*c.cbid == kCbidNvccLaunchPtsz) {
      ++subs["__cudaLaunchKernel_ptsz (INVALID, cbid 506) as __cudaLaunchKernel"];
      ++substituted;
    }
    return LaunchApi::kNvccLaunch;
  }
  if (api.rfind("__cudaLaunchKernel", 0) == 0) return LaunchApi::kNvccLaunch;
  if (api.rfind("cudaLaunchKernelExC", 0) == 0) return LaunchApi::kCudaLaunchKernelExC;
  if (api.rfind("cuLaunchKernelEx", 0) == 0) return LaunchApi::kCuLaunchKernelEx;
  if (api.rfind("cuLaunchKernel", 0) == 0) return LaunchApi::kCuLaunchKernel;
  if (api.rfind("cudaLaunchKernel", 0) == 0) return LaunchApi::kCudaLaunchKernel;
  // cudaLaunchCooperativeKernel, cuLaunchGrid, a runtime call that launched a library's kernel
  // (cudaMemcpy2D's, cudaMemsetD32's ...): the nearest launch simgpu has.
  const std::string what = api == "INVALID" && c.cbid ? "INVALID (cbid " + std::to_string(*c.cbid) + ")" : api;
  ++subs[what + " as " + (driver ? "cuLaunchKernel" : "cudaLaunchKernel")];
  ++substituted;
  return driver ? LaunchApi::kCuLaunchKernel : LaunchApi::kCudaLaunchKernel;
}

Action sync_action(const std::string& api) {
  if (contains(api, "DeviceSynchronize") || contains(api, "CtxSynchronize")) return Action::kDeviceSync;
  if (contains(api, "StreamSynchronize")) return Action::kStreamSync;
  if (contains(api, "EventSynchronize")) return Action::kEventSync;
  if (contains(api, "StreamWaitEvent")) return Action::kStreamWaitEvent;
  if (contains(api, "EventRecord")) return Action::kEventRecord;
  return Action::kLaunch;  // none
}

// The sequencer's key: timestamp, then the class of the item (see replay_plan.h), then a
// tie-break within the class.
struct Key {
  int64_t ts;
  int cls;
  int64_t a, b;
  bool operator<(const Key& o) const { return std::tie(ts, cls, a, b) < std::tie(o.ts, o.cls, o.a, o.b); }
};
constexpr int kClsRangeEnd = 0, kClsStep = 1, kClsRangeStart = 2, kClsZeroRangeEnd = 3, kClsCall = 4;

}  // namespace

bool is_nccl_kernel_name(const std::string& name) {
  const std::string id = nccl_identifier(name);
  return id.rfind("ncclKernel_", 0) == 0 || id.rfind("ncclDevKernel_", 0) == 0 ||
         id.rfind("ncclSymkDevKernel_", 0) == 0 || id.rfind("ncclSymk", 0) == 0;
}

NcclCall nccl_call_from_kernel_name(const std::string& name) {
  NcclCall c;
  c.count = 1;
  c.size_known = false;
  c.datatype = kInt8;
  const std::vector<std::string> toks = split(nccl_identifier(name), '_');
  const std::string op = toks.size() > 1 ? toks[1] : "";
  if (op == "AllReduce") c.op = NcclOp::kAllReduce;
  else if (op == "Broadcast") c.op = NcclOp::kBroadcast;
  else if (op == "Reduce") c.op = NcclOp::kReduce;
  else if (op == "AllGather") c.op = NcclOp::kAllGather;
  else if (op == "ReduceScatter") c.op = NcclOp::kReduceScatter;
  else c.op = NcclOp::kSendRecv;  // SendRecv, Generic, anything else: p2p of unknown purpose
  for (size_t i = 2; i < toks.size(); ++i) {
    int v = 0;
    if (kernel_redop(toks[i], &v)) c.redop = v;
    // "int8_t" splits into "int8" "t": try the joined token too.
    if (kernel_type(toks[i], &v) || (i + 1 < toks.size() && kernel_type(toks[i] + "_" + toks[i + 1], &v)))
      c.datatype = v;
  }
  return c;
}

bool nccl_call_from_args(const CollectiveArgs& a, NcclCall* out) {
  const std::string name = lower(a.collective);
  NcclOp op;
  if (contains(name, "all_to_all") || contains(name, "alltoall")) op = NcclOp::kAlltoAll;
  else if (contains(name, "allreduce") || contains(name, "all_reduce") || contains(name, "barrier")) op = NcclOp::kAllReduce;
  else if (contains(name, "reduce_scatter") || contains(name, "reducescatter")) op = NcclOp::kReduceScatter;
  else if (contains(name, "allgather") || contains(name, "all_gather")) op = NcclOp::kAllGather;
  else if (contains(name, "broadcast")) op = NcclOp::kBroadcast;
  else if (contains(name, "reduce")) op = NcclOp::kReduce;
  else if (contains(name, "send")) op = NcclOp::kSend;
  else if (contains(name, "recv")) op = NcclOp::kRecv;
  else if (contains(name, "gather")) op = NcclOp::kGather;
  else if (contains(name, "scatter")) op = NcclOp::kScatter;
  else return false;
  int type = 0;
  if (!torch_dtype(a.dtype, &type)) return false;
  const uint64_t size = a.group_size && *a.group_size > 0 ? static_cast<uint64_t>(*a.group_size) : 1;
  std::optional<uint64_t> count;
  switch (op) {
    case NcclOp::kAllReduce: case NcclOp::kBroadcast: case NcclOp::kReduce: case NcclOp::kSend:
    case NcclOp::kGather:
      count = a.in_nelems ? a.in_nelems : a.out_nelems;
      break;
    case NcclOp::kRecv: case NcclOp::kScatter:
      count = a.out_nelems ? a.out_nelems : a.in_nelems;
      break;
    case NcclOp::kAllGather:
      count = a.in_nelems ? a.in_nelems : a.out_nelems ? std::optional<uint64_t>(*a.out_nelems / size) : std::nullopt;
      break;
    case NcclOp::kReduceScatter:
      count = a.out_nelems ? a.out_nelems : a.in_nelems ? std::optional<uint64_t>(*a.in_nelems / size) : std::nullopt;
      break;
    case NcclOp::kAlltoAll:
      if (a.in_nelems) count = *a.in_nelems / size;
      else if (a.out_nelems) count = *a.out_nelems / size;
      break;
    case NcclOp::kSendRecv:
      break;
  }
  if (!count) return false;
  out->op = op;
  out->count = *count;
  out->datatype = type;
  out->redop = kSum;
  out->size_known = true;
  return true;
}

const char* action_name(Action a) {
  switch (a) {
    case Action::kRangeEnd: return "range end";
    case Action::kStep: return "step";
    case Action::kRangeStart: return "range start";
    case Action::kLaunch: return "launch";
    case Action::kMemcpy: return "memcpy";
    case Action::kMemset: return "memset";
    case Action::kGraph: return "graph launch";
    case Action::kNccl: return "NCCL call";
    case Action::kDeviceSync: return "device synchronize";
    case Action::kStreamSync: return "stream synchronize";
    case Action::kEventSync: return "event synchronize";
    case Action::kEventRecord: return "event record";
    case Action::kStreamWaitEvent: return "stream wait event";
  }
  return "?";
}

Plan make_plan(const Trace& trace, Mode mode) {
  Plan plan;
  plan.mode = mode;
  plan.rank = trace.rank.value_or(0);
  plan.world_size = std::max(trace.world_size.value_or(1), 1);
  Counts& n = plan.counts;

  // GPU work by the call that launched it.
  std::unordered_map<uint64_t, size_t> call_of;
  for (size_t i = 0; i < trace.calls.size(); ++i) {
    const ApiCall& c = trace.calls[i];
    auto [it, fresh] = call_of.try_emplace(c.correlation, i);
    if (!fresh && trace.calls[it->second].driver && !c.driver) it->second = i;  // the runtime call wins
  }
  std::unordered_map<size_t, std::vector<size_t>> works_of;
  int device = -1;
  for (size_t i = 0; i < trace.activities.size(); ++i) {
    const GpuActivity& a = trace.activities[i];
    auto it = call_of.find(a.correlation);
    if (it == call_of.end()) {
      ++n.no_launch;
      (a.kind == GpuKind::kKernel ? n.no_launch_kernels : a.kind == GpuKind::kMemcpy ? n.no_launch_memcpys
                                                                                       : n.no_launch_memsets)++;
      continue;
    }
    works_of[it->second].push_back(i);
    if (device < 0) device = a.device;
  }
  if (works_of.empty())
    throw TraceError(trace.path + ": holds no GPU activity whose launch is in it (" +
                     std::to_string(trace.activities.size()) + " GPU activities, " +
                     std::to_string(trace.calls.size()) + " CUDA runtime/driver calls)");
  if (auto d = trace.device_names.find(device); d != trace.device_names.end()) plan.device_name = d->second;

  // Threads, in order of first appearance; ids keyed by the recorded tid.
  std::map<int64_t, size_t> thread_of;
  auto thread_index = [&](int64_t tid, int64_t pid) {
    auto [it, fresh] = thread_of.try_emplace(tid, plan.threads.size());
    if (fresh) {
      ReplayThread t;
      t.tid = tid;
      if (auto nm = trace.thread_names.find(tid); nm != trace.thread_names.end()) t.name = nm->second;
      t.main = tid == pid;
      plan.threads.push_back(t);
    }
    return it->second;
  };

  std::vector<std::pair<Key, Item>> keyed;
  // Communicators: one per process group the arguments name, else one of the world's size.
  std::map<std::string, int> comm_of;
  auto communicator = [&](const std::string& name, int size, const std::vector<int>& ranks) {
    auto [it, fresh] = comm_of.try_emplace(name, static_cast<int>(plan.comms.size()));
    if (fresh) {
      Communicator c;
      c.name = name;
      c.size = std::max(size, 1);
      const auto pos = std::find(ranks.begin(), ranks.end(), plan.rank);
      c.rank = pos != ranks.end() ? static_cast<int>(pos - ranks.begin()) : plan.rank % c.size;
      plan.comms.push_back(c);
    }
    return it->second;
  };
  std::map<std::vector<std::string>, size_t> graph_of;
  auto shape_key = [&](const std::vector<size_t>& works) {
    std::vector<std::string> key;
    for (size_t w : works) {
      const GpuActivity& a = trace.activities[w];
      key.push_back(std::to_string(static_cast<int>(a.kind)) + "|" + a.name + "|" + std::to_string(a.bytes) + "|" +
                    std::to_string(a.stream) + "|" + std::to_string(a.grid[0]) + "," + std::to_string(a.grid[1]) +
                    "," + std::to_string(a.grid[2]) + "|" + std::to_string(a.block[0]) + "," +
                    std::to_string(a.block[1]) + "," + std::to_string(a.block[2]));
    }
    return key;
  };
  std::set<uint32_t> streams;

  for (size_t ci = 0; ci < trace.calls.size(); ++ci) {
    const ApiCall& c = trace.calls[ci];
    Item item;
    item.ts_ns = c.ts_ns;
    item.dur_ns = c.dur_ns;
    item.name = c.name;
    item.correlation = c.correlation;
    auto w = works_of.find(ci);
    if (w == works_of.end()) {
      const Action s = sync_action(c.name);
      if (c.name == "INVALID") {
        ++n.invalid_without_work;
        continue;
      }
      if (s == Action::kLaunch) {
        ++n.calls_without_work;
        continue;
      }
      item.action = s;
      if (c.sync_stream) item.stream = *c.sync_stream;
      else item.stream = 0;  // decided below: the thread's last stream
      ++n.syncs;
    } else {
      std::vector<size_t>& works = w->second;
      std::sort(works.begin(), works.end(), [&](size_t x, size_t y) {
        return std::tie(trace.activities[x].start_ns, x) < std::tie(trace.activities[y].start_ns, y);
      });
      item.works = works;
      const GpuActivity& first = trace.activities[works.front()];
      item.stream = first.stream;
      for (size_t wi : works) streams.insert(trace.activities[wi].stream);
      n.activities += works.size();
      if (works.size() > 1 || contains(c.name, "GraphLaunch")) {
        item.action = Action::kGraph;
        auto [it, fresh] = graph_of.try_emplace(shape_key(works), plan.graphs.size());
        if (fresh) plan.graphs.push_back({works});
        item.graph = it->second;
        ++n.graph_launches;
        if (!contains(c.name, "GraphLaunch")) {
          ++plan.substitutions[c.name + " (several activities) as cudaGraphLaunch"];
          ++n.substituted;
        }
      } else if (first.kind == GpuKind::kKernel && is_nccl_kernel_name(first.name)) {
        item.action = Action::kNccl;
        const CollectiveArgs* args = first.collective ? &*first.collective : nullptr;
        if (!args && first.external_id) {
          auto it = trace.collective_by_external_id.find(*first.external_id);
          if (it != trace.collective_by_external_id.end()) args = &it->second;
        }
        NcclCall call;
        if (args && nccl_call_from_args(*args, &call)) {
          std::string pg = args->pg_name;
          std::vector<int> ranks = args->pg_ranks;
          int size = args->group_size.value_or(static_cast<int>(ranks.size()));
          for (const ProcessGroup& g : trace.process_groups)
            if (g.name == pg) {
              if (ranks.empty()) ranks = g.ranks;
              if (size <= 0) size = g.size;
            }
          if (size <= 0) size = plan.world_size;
          call.comm = pg.empty() ? communicator("size " + std::to_string(size), size, ranks)
                                 : communicator(pg, size, ranks);
        } else {
          call = nccl_call_from_kernel_name(first.name);
          call.comm = communicator("world", plan.world_size, {});
          ++n.nccl_sized_by_name;
        }
        item.nccl = call;
        ++n.nccl_calls;
      } else if (first.kind == GpuKind::kKernel) {
        item.action = Action::kLaunch;
        item.api = launch_api(c, plan.substitutions, n.substituted);
        ++n.launches;
      } else if (first.kind == GpuKind::kMemcpy) {
        item.action = Action::kMemcpy;
        const bool peer = first.copy_kind == CopyKind::kPtoP;
        const char* want = peer ? "cudaMemcpyPeerAsync" : "cudaMemcpyAsync";
        if (c.name.rfind(want, 0) != 0 && !(c.driver && contains(c.name, "Async"))) {
          ++plan.substitutions[c.name + " as " + want];
          ++n.substituted;
        }
        ++n.memcpys;
      } else {
        item.action = Action::kMemset;
        if (c.name.rfind("cudaMemsetAsync", 0) != 0 && !(c.driver && contains(c.name, "Async"))) {
          ++plan.substitutions[c.name + " as cudaMemsetAsync"];
          ++n.substituted;
        }
        ++n.memsets;
      }
    }
    item.thread = thread_index(c.tid, c.pid);
    keyed.push_back({Key{item.ts_ns, kClsCall, static_cast<int64_t>(item.correlation), static_cast<int64_t>(ci)},
                     std::move(item)});
  }

  if (mode == Mode::kAnnotated) {
    // Per thread: ranges in opening order (start, then the longer first, then file order); a
    // range that outlives the one it opened in is cut at that one's end, so ranges nest.
    std::map<int64_t, std::vector<size_t>> by_thread;
    for (size_t i = 0; i < trace.annotations.size(); ++i) by_thread[trace.annotations[i].tid].push_back(i);
    for (auto& [tid, list] : by_thread) {
      std::stable_sort(list.begin(), list.end(), [&](size_t x, size_t y) {
        const Annotation &a = trace.annotations[x], &b = trace.annotations[y];
        return std::make_tuple(a.ts_ns, -a.dur_ns) < std::make_tuple(b.ts_ns, -b.dur_ns);
      });
      std::vector<int64_t> open_ends;
      int64_t order = 0;
      for (size_t i : list) {
        const Annotation& a = trace.annotations[i];
        const size_t th = thread_index(a.tid, a.pid);
        if (a.name.rfind("ProfilerStep#", 0) == 0) {
          Item step;
          step.action = Action::kStep;
          step.ts_ns = a.ts_ns + a.dur_ns;
          step.thread = th;
          step.name = a.name;
          keyed.push_back({Key{step.ts_ns, kClsStep, static_cast<int64_t>(th), order++}, std::move(step)});
          ++n.steps;
          continue;
        }
        while (!open_ends.empty() && open_ends.back() <= a.ts_ns) open_ends.pop_back();
        int64_t end = a.ts_ns + a.dur_ns;
        if (!open_ends.empty() && end > open_ends.back()) {
          end = open_ends.back();
          ++n.ranges_cut;
        }
        const int64_t my_order = order++;
        Item start;
        start.action = Action::kRangeStart;
        start.ts_ns = a.ts_ns;
        start.dur_ns = end - a.ts_ns;
        start.thread = th;
        start.name = a.name;
        Item stop = start;
        stop.action = Action::kRangeEnd;
        stop.ts_ns = end;
        keyed.push_back({Key{a.ts_ns, kClsRangeStart, static_cast<int64_t>(th), my_order}, std::move(start)});
        // Innermost first: the range opened last ends first among those ending together.
        keyed.push_back({Key{end, end == a.ts_ns ? kClsZeroRangeEnd : kClsRangeEnd, static_cast<int64_t>(th),
                             -my_order},
                         std::move(stop)});
        if (end > a.ts_ns) open_ends.push_back(end);
        ++n.ranges;
      }
    }
  }

  // NCCL captured into a graph: its calls are made at capture, on the world's communicator.
  for (const GraphShape& g : plan.graphs)
    for (size_t w : g.nodes)
      if (trace.activities[w].kind == GpuKind::kKernel && is_nccl_kernel_name(trace.activities[w].name))
        plan.graph_comm = communicator("world", plan.world_size, {});
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  // Synchronisations whose stream the trace does not name take the stream of the last work
  // their thread launched (PyTorch's .item(): a copy to the host, then its stream's sync).
  std::vector<uint32_t> last_stream(plan.threads.size(), 7);
  plan.items.reserve(keyed.size());
  for (auto& [key, item] : keyed) {
    if (!item.works.empty()) last_stream[item.thread] = item.stream;
    const bool sync = item.action == Action::kStreamSync || item.action == Action::kEventRecord ||
                      item.action == Action::kStreamWaitEvent || item.action == Action::kEventSync ||
                      item.action == Action::kDeviceSync;
    if (sync && item.stream == 0) item.stream = last_stream[item.thread];
    if (sync) streams.insert(item.stream);
    plan.items.push_back(std::move(item));
  }
  plan.first_ns = plan.items.empty() ? 0 : plan.items.front().ts_ns;
  for (const Item& it : plan.items)
    for (size_t wi : it.works) plan.first_ns = std::min(plan.first_ns, trace.activities[wi].start_ns);
  plan.streams.assign(streams.begin(), streams.end());
  // The recording's main thread plays on ours: the one whose tid is its pid, else the first.
  if (std::none_of(plan.threads.begin(), plan.threads.end(), [](const ReplayThread& t) { return t.main; }) &&
      !plan.threads.empty())
    plan.threads.front().main = true;
  bool seen_main = false;
  for (ReplayThread& t : plan.threads) {
    if (t.main && seen_main) t.main = false;
    seen_main = seen_main || t.main;
  }
  return plan;
}

}  // namespace sim_replay
