// sim_replay's trace reader and plan (tests/sim/replay): Kineto's formats old and new, exact
// timestamps, refusals, and the order, calls and NCCL arguments the replay is built from.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kineto_trace.h"
#include "replay_plan.h"

using namespace sim_replay;

namespace {

// A torch 2.x trace's shape: float microseconds, cuda_runtime/cuda_driver/kernel/gpu_memcpy,
// ac2g flows, a cuda_sync event naming its stream, NCCL arguments on the kernel.
const char* kCurrent = R"JSON({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 1}],
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 4,
                      "pg_config": [{"pg_name": "0", "pg_size": 4, "ranks": [0, 1, 2, 3]}]},
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 10, "tid": 10, "ts": 100.0, "dur": 900.0, "args": {"External id": 1}},
    {"ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": 10, "tid": 10, "ts": 110.5, "dur": 300.25, "args": {"External id": 2}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 10, "ts": 120, "dur": 10, "args": {"External id": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 121.001, "dur": 4.5, "args": {"External id": 3, "cbid": 211, "correlation": 50}},
    {"ph": "s", "id": 50, "pid": 10, "tid": 10, "ts": 121.001, "cat": "ac2g", "name": "ac2g"},
    {"ph": "X", "cat": "kernel", "name": "void gemm<float>(float*)", "pid": 0, "tid": 7, "ts": 130.5, "dur": 20.25,
     "args": {"External id": 3, "device": 0, "stream": 7, "correlation": 50, "grid": [4, 2, 1], "block": [128, 1, 1], "shared memory": 256}},
    {"ph": "f", "id": 50, "pid": 0, "tid": 7, "ts": 130.5, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 10, "tid": 11, "ts": 200, "dur": 3, "args": {"correlation": 51}},
    {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_0", "pid": 0, "tid": 7, "ts": 210, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 51}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 10, "tid": 10, "ts": 300, "dur": 2, "args": {"correlation": 52}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 13, "ts": 305, "dur": 7, "args": {"device": 0, "stream": 13, "correlation": 52, "bytes": 4096}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 10, "tid": 10, "ts": 313, "dur": 5, "args": {"correlation": 53}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 13, "ts": 313, "dur": 5, "args": {"correlation": 53, "stream": 13, "device": 0}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 10, "tid": 10, "ts": 400, "dur": 8, "args": {"correlation": 54, "External id": 9}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20, "ts": 409, "dur": 50,
     "args": {"device": 0, "stream": 20, "correlation": 54, "Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
              "Group size": 4, "dtype": "BFloat16", "Process Group Name": "0", "Process Group Ranks": "[0, 1, 2, 3]"}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventQuery", "pid": 10, "tid": 10, "ts": 500, "dur": 1, "args": {"correlation": 55}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "## forward ##", "pid": 0, "tid": 7, "ts": 130, "dur": 30, "args": {}},
    {"ph": "i", "name": "Record Window End", "pid": "", "tid": "", "ts": 1100, "s": "g"},
    {"name": "thread_name", "ph": "M", "ts": 100, "pid": 10, "tid": 11, "args": {"name": "thread 11 (pt_autograd_0)"}}
  ]
})JSON";

// A 2022 trace's shape: capitalized categories, integer microseconds, no deviceProperties.
const char* kOld = R"JSON({"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 8}, "traceEvents": [
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 5, "ts": 1661203462598800, "dur": 6, "args": {"correlation": 9, "external id": 1}},
  {"ph": "X", "cat": "Kernel", "name": "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "pid": 0, "tid": 21, "ts": 1661203462598810, "dur": 100, "args": {"stream": 21, "correlation": 9, "device": 3}},
  {"ph": "X", "cat": "Runtime", "name": "INVALID", "pid": 5, "tid": 5, "ts": 1661203462598900, "dur": 1, "args": {"correlation": 10}},
  {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 1661203462598950, "dur": 2, "args": {"stream": 7, "correlation": 11, "bytes": 64}}
]})JSON";

std::string gzip_of(const std::string& text) {
  std::string out(compressBound(text.size()) + 64, '\0');
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Files the refusal cases read, removed when the test binary ends.
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (const std::string& p : paths) std::remove(p.c_str());
  }
};
TempFiles temp_files;

std::string write_temp(const std::string& bytes, const char* suffix) {
  const std::string path = "/tmp/sim_replay_test_" + std::to_string(getpid()) + "_" +
                           std::to_string(temp_files.paths.size()) + suffix;
  temp_files.paths.push_back(path);
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

std::string refusal(const std::string& path) {
  try {
    Trace t = read_kineto_trace(path);
    make_plan(t, Mode::kBare);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

const Item* find_item(const Plan& p, Action a) {
  for (const Item& it : p.items)
    if (it.action == a) return &it;
  return nullptr;
}

}  // namespace

TEST_CASE("replay timestamps are exact nanoseconds from Kineto's microsecond text", "[replay]") {
  CHECK(microseconds_to_ns("1712195495519689.047") == 1712195495519689047);  // beyond a double's ns
  CHECK(microseconds_to_ns("1683564901548726") == 1683564901548726000);
  CHECK(microseconds_to_ns(" 12.5 ") == 12500);
  CHECK(microseconds_to_ns("1.0005") == 1001);   // half up
  CHECK(microseconds_to_ns("1.00049") == 1000);
  CHECK(microseconds_to_ns("-3.2") == -3200);
  CHECK(microseconds_to_ns("2e3") == 2000000);
  CHECK_FALSE(microseconds_to_ns("abc"));
  CHECK_FALSE(microseconds_to_ns("1.2.3"));
}

TEST_CASE("replay reads memcpy kinds and memory kinds from Kineto's names", "[replay]") {
  CopyKind k;
  MemoryKind s, d;
  parse_memcpy_name("Memcpy HtoD (Pinned -> Device)", &k, &s, &d);
  CHECK((k == CopyKind::kHtoD && s == MemoryKind::kPinned && d == MemoryKind::kDevice));
  parse_memcpy_name("Memcpy DtoH (Device -> Pageable)", &k, &s, &d);
  CHECK((k == CopyKind::kDtoH && s == MemoryKind::kDevice && d == MemoryKind::kPageable));
  parse_memcpy_name("Memcpy PtoP (Device -> Device)", &k, &s, &d);
  CHECK(k == CopyKind::kPtoP);
  parse_memcpy_name("Memcpy DtoH", &k, &s, &d);  // older names carry no memory kinds
  CHECK((k == CopyKind::kDtoH && s == MemoryKind::kDevice && d == MemoryKind::kPageable));
}

TEST_CASE("replay reads a current Kineto trace: calls, GPU work, NCCL arguments, syncs, skipped events",
          "[replay]") {
  const Trace t = parse_kineto_trace(kCurrent, "current.json");
  CHECK(t.rank == 1);
  CHECK(t.world_size == 4);
  REQUIRE(t.process_groups.size() == 1);
  CHECK(t.process_groups[0].ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(t.device_names.at(0) == "NVIDIA H200");
  REQUIRE(t.activities.size() == 4);
  const GpuActivity& gemm = t.activities[0];
  CHECK(gemm.name == "void gemm<float>(float*)");
  CHECK(gemm.start_ns == 130500);
  CHECK(gemm.dur_ns == 20250);
  CHECK((gemm.grid[0] == 4 && gemm.grid[1] == 2 && gemm.block[0] == 128 && gemm.shared_mem == 256));
  CHECK(t.activities[2].bytes == 4096);
  CHECK(t.activities[2].src == MemoryKind::kPinned);
  REQUIRE(t.activities[3].collective);
  CHECK(t.activities[3].collective->in_nelems == 1024u);
  CHECK(t.activities[3].collective->pg_ranks.size() == 4);
  REQUIRE(t.calls.size() == 6);
  CHECK(t.calls[0].ts_ns == 121001);
  CHECK(t.calls[1].driver);
  const auto sync = std::find_if(t.calls.begin(), t.calls.end(),
                                 [](const ApiCall& c) { return c.name == "cudaStreamSynchronize"; });
  REQUIRE(sync != t.calls.end());
  CHECK(sync->sync_stream == 13u);  // from the cuda_sync event of the same correlation
  CHECK(t.annotations.size() == 2);
  CHECK(t.thread_names.at(11) == "pt_autograd_0");
  CHECK(t.unplayed.cpu_ops == 1);
  CHECK(t.unplayed.flows == 2);
  CHECK(t.unplayed.instants == 1);
  CHECK(t.unplayed.gpu_annotations == 1);
}

TEST_CASE("replay reads a 2022 Kineto trace: capitalised categories, INVALID calls skipped", "[replay]") {
  const Trace t = parse_kineto_trace(kOld, "old.json");
  CHECK(t.rank == 3);
  REQUIRE(t.calls.size() == 2);
  CHECK(t.unplayed.invalid_calls == 1);
  REQUIRE(t.activities.size() == 2);
  CHECK(t.activities[1].kind == GpuKind::kMemset);
  const Plan p = make_plan(t, Mode::kBare);
  CHECK(p.counts.no_launch == 1);  // the memset's launch is not in the trace
  CHECK(p.counts.invalid_without_work == 1);
  CHECK(p.counts.no_launch_memsets == 1);
  REQUIRE(p.items.size() == 1);
  CHECK(p.items[0].action == Action::kNccl);
  CHECK(p.items[0].nccl.op == NcclOp::kSendRecv);  // the name says no more
  CHECK_FALSE(p.items[0].nccl.size_known);
  CHECK(p.items[0].stream == 21);
  REQUIRE(p.comms.size() == 1);
  CHECK((p.comms[0].size == 8 && p.comms[0].rank == 3));
}

TEST_CASE("replay refuses what is not a playable trace, in one line naming the file", "[replay]") {
  CHECK(refusal(write_temp("not json at all", ".json")).find("is not valid JSON") != std::string::npos);
  CHECK(refusal(write_temp(R"JSON({"schemaVersion": 1})JSON", ".json")).find("has no traceEvents") != std::string::npos);
  CHECK(refusal(write_temp(R"JSON([1, 2])JSON", ".json")).find("is not a Kineto trace") != std::string::npos);
  const std::string text(kCurrent);
  const std::string cut = write_temp(text.substr(0, text.size() / 2), ".json");
  const std::string why = refusal(cut);
  CHECK(why.find(cut) == 0);
  CHECK(why.find("truncated") != std::string::npos);
  const std::string gz = gzip_of(text);
  CHECK(refusal(write_temp(gz, ".json.gz")).empty());  // whole: read
  CHECK(refusal(write_temp(gz.substr(0, gz.size() / 2), ".json.gz")).find("gzip stream ends early") != std::string::npos);
  const std::string no_launch = write_temp(
      R"JSON({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"correlation": 3}}]})JSON",
      ".json");
  CHECK(refusal(no_launch).find("holds no GPU activity whose launch is in it") != std::string::npos);
  CHECK(refusal("/nonexistent/trace.json").find("cannot be read") != std::string::npos);
}

TEST_CASE("replay plan: NCCL calls from the arguments, launch APIs as recorded, syncs on their stream", "[replay]") {
  const Trace t = parse_kineto_trace(kCurrent, "current.json");
  const Plan p = make_plan(t, Mode::kBare);
  CHECK((p.rank == 1 && p.world_size == 4 && p.device_name == "NVIDIA H200"));
  const Item* nccl = find_item(p, Action::kNccl);
  REQUIRE(nccl != nullptr);
  CHECK(nccl->nccl.op == NcclOp::kAllReduce);
  CHECK(nccl->nccl.count == 1024);
  CHECK(nccl->nccl.datatype == 9);  // ncclBfloat16
  CHECK(nccl->nccl.size_known);
  CHECK(nccl->stream == 20);
  REQUIRE(p.comms.size() == 1);
  CHECK((p.comms[0].name == "0" && p.comms[0].size == 4 && p.comms[0].rank == 1));
  std::vector<LaunchApi> apis;
  for (const Item& it : p.items)
    if (it.action == Action::kLaunch) apis.push_back(it.api);
  CHECK(apis == std::vector<LaunchApi>{LaunchApi::kCudaLaunchKernel, LaunchApi::kCuLaunchKernel});
  const Item* sync = find_item(p, Action::kStreamSync);
  REQUIRE(sync != nullptr);
  CHECK(sync->stream == 13);
  CHECK(p.counts.calls_without_work == 1);  // cudaEventQuery
  CHECK(p.counts.ranges == 0);               // bare: no ranges, no steps
  CHECK(p.counts.steps == 0);
  CHECK(p.streams == std::vector<uint32_t>{7, 13, 20});
  CHECK(p.first_ns == 121001);
  REQUIRE(p.threads.size() == 2);
  CHECK(p.threads[0].main);  // tid 10 == pid 10
  CHECK(p.threads[1].name == "pt_autograd_0");
}

TEST_CASE("replay plan orders range ends, step ends, range starts, then calls at one timestamp", "[replay]") {
  // Thread 1: outer [0,100) holding inner [10,50) and an empty range at 50; a launch at 50 (the
  // inner range has just ended) and one at 10 (the inner range has just started); a step ends
  // at 100 on thread 1 while thread 2 launches at 100. A child outliving its parent is cut.
  const char* text = R"JSON({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "inner", "pid": 1, "tid": 1, "ts": 10, "dur": 40},
    {"ph": "X", "cat": "user_annotation", "name": "empty", "pid": 1, "tid": 1, "ts": 50, "dur": 0},
    {"ph": "X", "cat": "user_annotation", "name": "late", "pid": 1, "tid": 1, "ts": 60, "dur": 60},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 50, "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 100, "dur": 1, "args": {"correlation": 3}},
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 12, "dur": 1, "args": {"stream": 7, "correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 52, "dur": 1, "args": {"stream": 7, "correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 102, "dur": 1, "args": {"stream": 7, "correlation": 3}}
  ]})JSON";
  const Plan p = make_plan(parse_kineto_trace(text, "order.json"), Mode::kAnnotated);
  std::vector<std::string> seq;
  for (const Item& it : p.items)
    seq.push_back(std::string(action_name(it.action)) + " " +
                  (it.works.empty() ? it.name : std::to_string(it.ts_ns / 1000)));
  const std::vector<std::string> want = {
      "range start outer", "range start inner", "launch 10", "range end inner", "range start empty",
      "range end empty", "launch 50", "range start late", "range end late", "range end outer",
      "step ProfilerStep#1", "launch 100"};
  CHECK(seq == want);
  CHECK(p.counts.ranges_cut == 1);  // "late" ends with "outer"
  CHECK(p.counts.steps == 1);
  CHECK(p.counts.ranges == 4);
}

TEST_CASE("replay plan: a graph launch replays a graph captured once per shape", "[replay]") {
  const char* text = R"JSON({"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 40, "dur": 5, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 80, "dur": 5, "args": {"correlation": 3}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 20, "dur": 1, "args": {"stream": 7, "correlation": 1, "bytes": 8}},
    {"ph": "X", "cat": "kernel", "name": "triton_0", "pid": 0, "tid": 7, "ts": 22, "dur": 3, "args": {"stream": 7, "correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "triton_0", "pid": 0, "tid": 7, "ts": 52, "dur": 3, "args": {"stream": 7, "correlation": 2}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 50, "dur": 1, "args": {"stream": 7, "correlation": 2, "bytes": 8}},
    {"ph": "X", "cat": "kernel", "name": "triton_1", "pid": 0, "tid": 7, "ts": 90, "dur": 3, "args": {"stream": 7, "correlation": 3}}
  ]})JSON";
  const Plan p = make_plan(parse_kineto_trace(text, "graphs.json"), Mode::kBare);
  REQUIRE(p.items.size() == 3);
  CHECK(p.graphs.size() == 2);
  CHECK(p.items[0].graph == p.items[1].graph);  // same nodes in start order: one graph
  CHECK(p.items[2].graph != p.items[0].graph);
  CHECK(p.items[1].works.size() == 2);
  CHECK(p.counts.graph_launches == 3);
  CHECK(p.counts.activities == 5);
}

TEST_CASE("replay plays a call Kineto names INVALID when GPU work says it launched some", "[replay]") {
  // torch 2.11's Kineto names every callback past CUDA 12's INVALID: on CUDA 13 that is the <<<>>>
  // launch (__cudaLaunchKernel, cbid 505). Its kernels are launches all the same.
  const char* text = R"JSON({"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "INVALID", "pid": 1, "tid": 1, "ts": 10, "dur": 2, "args": {"cbid": 505, "correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "void at::native::elementwise_kernel<128, 4>(int)", "pid": 0, "tid": 7, "ts": 15, "dur": 3, "args": {"stream": 7, "correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "INVALID", "pid": 1, "tid": 1, "ts": 20, "dur": 2, "args": {"cbid": 521, "correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 25, "dur": 3, "args": {"stream": 7, "correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "INVALID", "pid": 1, "tid": 1, "ts": 30, "dur": 2, "args": {"cbid": 409, "correlation": 3}}
  ]})JSON";
  const Plan p = make_plan(parse_kineto_trace(text, "cuda13.json"), Mode::kBare);
  REQUIRE(p.items.size() == 2);
  CHECK(p.items[0].api == LaunchApi::kNvccLaunch);
  CHECK(p.items[1].api == LaunchApi::kCudaLaunchKernel);
  CHECK(p.substitutions.at("INVALID (cbid 521) as cudaLaunchKernel") == 1);
  CHECK(p.counts.invalid_without_work == 1);
  CHECK(p.counts.calls_without_work == 0);
}

TEST_CASE("replay takes NCCL calls from kernel names when the trace has no arguments", "[replay]") {
  NcclCall c = nccl_call_from_kernel_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)");
  CHECK((c.op == NcclOp::kAllReduce && c.datatype == 7 && c.redop == 0 && c.count == 1 && !c.size_known));
  c = nccl_call_from_kernel_name("ncclDevKernel_ReduceScatter_MinMax_bf16_RING_LL");
  CHECK((c.op == NcclOp::kReduceScatter && c.datatype == 9 && c.redop == 2));
  c = nccl_call_from_kernel_name("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)");
  CHECK((c.op == NcclOp::kBroadcast && c.datatype == 0));
  c = nccl_call_from_kernel_name("void ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)");
  CHECK(c.op == NcclOp::kSendRecv);
  CHECK(is_nccl_kernel_name("void ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
  CHECK(is_nccl_kernel_name("ncclSymkDevKernel_AllGather_LL"));
  CHECK_FALSE(is_nccl_kernel_name("my_nccl_like_kernel"));
  NcclCall a;
  CollectiveArgs args;
  args.collective = "all_to_allv";
  args.dtype = "Float";
  args.in_nelems = 4096;
  args.group_size = 8;
  REQUIRE(nccl_call_from_args(args, &a));
  CHECK((a.op == NcclOp::kAlltoAll && a.count == 512));  // per peer
  args.collective = "_reduce_scatter_base";
  args.out_nelems = 100;
  REQUIRE(nccl_call_from_args(args, &a));
  CHECK((a.op == NcclOp::kReduceScatter && a.count == 100));
  args.collective = "mystery";
  CHECK_FALSE(nccl_call_from_args(args, &a));
  args.collective = "allreduce";
  args.dtype = "ComplexFloat";  // no NCCL type: the name decides
  CHECK_FALSE(nccl_call_from_args(args, &a));
}
