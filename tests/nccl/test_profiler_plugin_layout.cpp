// traintime's declarations of NCCL's profiler plugin interface (nccl/api/traintime/nccl/
// profiler_plugin_api.h) have NCCL's sizes and field offsets, version by version. The numbers
// are NCCL's, read by hand, never computed from our own declarations:
//  - v3 ... v6: NVIDIA/nccl v2.30.7-1, src/include/plugin/profiler/profiler_v3.h ... profiler_v6.h
//    (x86-64 layout of the structs declared there);
//  - every version as released: `gdb -batch -ex 'ptype /o ncclProfilerEventDescr_vN_t'` (and
//    ncclProfiler_vN_t, ncclProfilerEventStateArgs_vN_t) on the libnccl.so.2 of PyPI's
//    nvidia-nccl-cu12 2.28.9 (v3 ... v5) and 2.32.3 (v3 ... v7; v7 exists in no header of
//    v2.30.7-1, so 2.32.3's debug information is its source). Both releases agree on v3 ... v5.
// A field at another offset means NCCL would read our answers, or we its descriptors, wrongly.
#include <cstddef>

#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "traintime/nccl/profiler_plugin_api.h"

namespace np = traintime::nccl_profiler;

#define FIELD(T, member, offset, size)                                  \
  do {                                                                  \
    CHECK(offsetof(T, member) == (offset));                             \
    CHECK(sizeof(static_cast<T*>(nullptr)->member) == (size));          \
  } while (0)

TEST_CASE("profiler plugin tables: six pointers at NCCL's offsets, every version", "[profiler_layout]") {
  // ncclProfiler_v3_t ... ncclProfiler_v7_t: name, init, startEvent, stopEvent, recordEventState,
  // finalize; 48 bytes.
#define PLUGIN_TABLE(T)                  \
  STATIC_REQUIRE(sizeof(T) == 48);       \
  FIELD(T, name, 0, 8);                  \
  FIELD(T, init, 8, 8);                  \
  FIELD(T, start_event, 16, 8);          \
  FIELD(T, stop_event, 24, 8);           \
  FIELD(T, record_event_state, 32, 8);   \
  FIELD(T, finalize, 40, 8)
  PLUGIN_TABLE(np::PluginV3);
  PLUGIN_TABLE(np::PluginV4);
  PLUGIN_TABLE(np::PluginV5);
  PLUGIN_TABLE(np::PluginV6);
  PLUGIN_TABLE(np::PluginV7);
#undef PLUGIN_TABLE
}

TEST_CASE("profiler plugin v3: ncclProfilerEventDescr_v3_t and its state arguments", "[profiler_layout]") {
  using D = np::EventDescrV3;
  STATIC_REQUIRE(sizeof(D) == 120);
  FIELD(D, type, 0, 1);  // uint8_t before v5
  FIELD(D, parent, 8, 8);
  FIELD(D, rank, 16, 4);
  FIELD(D, coll, 24, 96);
  FIELD(D, coll.comm_name, 24, 8);
  FIELD(D, coll.comm_hash, 32, 8);
  FIELD(D, coll.seq_number, 40, 8);
  FIELD(D, coll.func, 48, 8);
  FIELD(D, coll.send_buff, 56, 8);
  FIELD(D, coll.recv_buff, 64, 8);
  FIELD(D, coll.count, 72, 8);
  FIELD(D, coll.root, 80, 4);
  FIELD(D, coll.datatype, 88, 8);
  FIELD(D, coll.n_max_channels, 96, 1);
  FIELD(D, coll.n_warps, 97, 1);
  FIELD(D, coll.algo, 104, 8);
  FIELD(D, coll.proto, 112, 8);
  FIELD(D, p2p, 24, 56);
  FIELD(D, p2p.comm_name, 24, 8);
  FIELD(D, p2p.comm_hash, 32, 8);
  FIELD(D, p2p.func, 40, 8);
  FIELD(D, p2p.buff, 48, 8);
  FIELD(D, p2p.datatype, 56, 8);
  FIELD(D, p2p.count, 64, 8);
  FIELD(D, p2p.peer, 72, 4);
  FIELD(D, proxy_op, 24, 24);
  FIELD(D, proxy_op.pid, 24, 4);
  FIELD(D, proxy_op.channel_id, 28, 1);
  FIELD(D, proxy_op.peer, 32, 4);
  FIELD(D, proxy_op.n_steps, 36, 4);
  FIELD(D, proxy_op.chunk_size, 40, 4);
  FIELD(D, proxy_op.is_send, 44, 4);
  FIELD(D, proxy_step.step, 24, 4);
  FIELD(D, kernel_ch, 24, 1);
  FIELD(D, kernel_ch.channel_id, 24, 1);
  FIELD(D, net_plugin.id, 24, 8);
  FIELD(D, net_plugin.data, 32, 8);

  using S = np::StateArgsV3;
  STATIC_REQUIRE(sizeof(S) == 16);
  FIELD(S, proxy_op.trans_size, 0, 8);
  FIELD(S, proxy_op.steps, 8, 4);
  FIELD(S, proxy_ctrl.appended_proxy_ops, 0, 4);
}

TEST_CASE("profiler plugin v4: ncclProfilerEventDescr_v4_t and its state arguments", "[profiler_layout]") {
  using D = np::EventDescrV4;
  STATIC_REQUIRE(sizeof(D) == 104);
  FIELD(D, type, 0, 1);
  FIELD(D, parent, 8, 8);
  FIELD(D, rank, 16, 4);
  FIELD(D, coll, 24, 80);
  FIELD(D, coll.seq_number, 24, 8);
  FIELD(D, coll.func, 32, 8);
  FIELD(D, coll.send_buff, 40, 8);
  FIELD(D, coll.recv_buff, 48, 8);
  FIELD(D, coll.count, 56, 8);
  FIELD(D, coll.root, 64, 4);
  FIELD(D, coll.datatype, 72, 8);
  FIELD(D, coll.n_channels, 80, 1);
  FIELD(D, coll.n_warps, 81, 1);
  FIELD(D, coll.algo, 88, 8);
  FIELD(D, coll.proto, 96, 8);
  FIELD(D, p2p, 24, 40);
  FIELD(D, p2p.func, 24, 8);
  FIELD(D, p2p.buff, 32, 8);
  FIELD(D, p2p.datatype, 40, 8);
  FIELD(D, p2p.count, 48, 8);
  FIELD(D, p2p.peer, 56, 4);
  FIELD(D, p2p.n_channels, 60, 1);
  FIELD(D, proxy_op.pid, 24, 4);
  FIELD(D, proxy_op.is_send, 44, 4);
  FIELD(D, proxy_step.step, 24, 4);
  FIELD(D, kernel_ch, 24, 16);
  FIELD(D, kernel_ch.channel_id, 24, 1);
  FIELD(D, kernel_ch.gpu_timer, 32, 8);
  FIELD(D, net_plugin.id, 24, 8);
  FIELD(D, net_plugin.data, 32, 8);

  using S = np::StateArgsV4;
  STATIC_REQUIRE(sizeof(S) == 8);
  FIELD(S, proxy_step.trans_size, 0, 8);
  FIELD(S, proxy_ctrl.appended_proxy_ops, 0, 4);
  FIELD(S, net_plugin.data, 0, 8);
  FIELD(S, kernel_ch.gpu_timer, 0, 8);
}

// v5 and v6 share these members at these offsets.
#define V5_MEMBERS(D)                              \
  FIELD(D, type, 0, 8); /* uint64_t from v5 on */ \
  FIELD(D, parent, 8, 8);                          \
  FIELD(D, rank, 16, 4);                           \
  FIELD(D, group_api.graph_captured, 24, 1);       \
  FIELD(D, group_api.group_depth, 28, 4);          \
  FIELD(D, coll_api.func, 24, 8);                  \
  FIELD(D, coll_api.count, 32, 8);                 \
  FIELD(D, coll_api.datatype, 40, 8);              \
  FIELD(D, coll_api.root, 48, 4);                  \
  FIELD(D, coll_api.stream, 56, 8);                \
  FIELD(D, coll_api.graph_captured, 64, 1);        \
  FIELD(D, p2p_api.func, 24, 8);                   \
  FIELD(D, p2p_api.count, 32, 8);                  \
  FIELD(D, p2p_api.datatype, 40, 8);               \
  FIELD(D, p2p_api.stream, 48, 8);                 \
  FIELD(D, p2p_api.graph_captured, 56, 1);         \
  FIELD(D, kernel_launch.stream, 24, 8);           \
  FIELD(D, coll.seq_number, 24, 8);                \
  FIELD(D, coll.func, 32, 8);                      \
  FIELD(D, coll.send_buff, 40, 8);                 \
  FIELD(D, coll.recv_buff, 48, 8);                 \
  FIELD(D, coll.count, 56, 8);                     \
  FIELD(D, coll.root, 64, 4);                      \
  FIELD(D, coll.datatype, 72, 8);                  \
  FIELD(D, coll.n_channels, 80, 1);                \
  FIELD(D, coll.n_warps, 81, 1);                   \
  FIELD(D, coll.algo, 88, 8);                      \
  FIELD(D, coll.proto, 96, 8);                     \
  FIELD(D, coll.parent_group, 104, 8);             \
  FIELD(D, p2p.func, 24, 8);                       \
  FIELD(D, p2p.buff, 32, 8);                       \
  FIELD(D, p2p.datatype, 40, 8);                   \
  FIELD(D, p2p.count, 48, 8);                      \
  FIELD(D, p2p.peer, 56, 4);                       \
  FIELD(D, p2p.n_channels, 60, 1);                 \
  FIELD(D, proxy_op.pid, 24, 4);                   \
  FIELD(D, proxy_op.channel_id, 28, 1);            \
  FIELD(D, proxy_op.is_send, 44, 4);               \
  FIELD(D, proxy_step.step, 24, 4);                \
  FIELD(D, kernel_ch.channel_id, 24, 1);           \
  FIELD(D, kernel_ch.gpu_timer, 32, 8);            \
  FIELD(D, net_plugin.id, 24, 8);                  \
  FIELD(D, net_plugin.data, 32, 8)

TEST_CASE("profiler plugin v5: ncclProfilerEventDescr_v5_t", "[profiler_layout]") {
  using D = np::EventDescrV5;
  STATIC_REQUIRE(sizeof(D) == 112);
  V5_MEMBERS(D);
  FIELD(D, coll, 24, 88);
  FIELD(D, coll_api, 24, 48);
  FIELD(D, p2p_api, 24, 40);
  FIELD(D, p2p, 24, 48);
  FIELD(D, p2p.parent_group, 64, 8);
  STATIC_REQUIRE(sizeof(np::StateArgsV5) == 8);
}

TEST_CASE("profiler plugin v6: ncclProfilerEventDescr_v6_t, copy-engine events", "[profiler_layout]") {
  using D = np::EventDescrV6;
  STATIC_REQUIRE(sizeof(D) == 112);
  V5_MEMBERS(D);
  FIELD(D, p2p.parent_group, 64, 8);
  FIELD(D, ce_coll, 24, 88);
  FIELD(D, ce_coll.seq_number, 24, 8);
  FIELD(D, ce_coll.func, 32, 8);
  FIELD(D, ce_coll.send_buff, 40, 8);
  FIELD(D, ce_coll.recv_buff, 48, 8);
  FIELD(D, ce_coll.count, 56, 8);
  FIELD(D, ce_coll.root, 64, 4);
  FIELD(D, ce_coll.datatype, 72, 8);
  FIELD(D, ce_coll.sync_strategy, 80, 8);
  FIELD(D, ce_coll.intra_batch_sync, 88, 1);
  FIELD(D, ce_coll.batch_size, 92, 4);
  FIELD(D, ce_coll.num_batches, 96, 4);
  FIELD(D, ce_coll.ce_seq_num, 100, 4);
  FIELD(D, ce_coll.stream, 104, 8);
  FIELD(D, ce_coll_sync.is_complete, 24, 1);
  FIELD(D, ce_coll_sync.nranks, 28, 4);
  FIELD(D, ce_coll_batch.num_ops, 24, 4);
  FIELD(D, ce_coll_batch.total_bytes, 32, 8);
  FIELD(D, ce_coll_batch.use_intra_sync, 40, 1);
}

TEST_CASE("profiler plugin v7 (NCCL 2.32.3): user tags, symmetric kernels, kernel phases", "[profiler_layout]") {
  using D = np::EventDescrV7;
  STATIC_REQUIRE(sizeof(D) == 136);
  V5_MEMBERS(D);
  FIELD(D, coll_api, 24, 56);
  FIELD(D, coll_api.user_tag, 72, 8);
  FIELD(D, p2p_api, 24, 48);
  FIELD(D, p2p_api.user_tag, 64, 8);
  FIELD(D, coll, 24, 112);
  FIELD(D, coll.kernel_variant, 112, 8);
  FIELD(D, coll.is_sym_coll, 120, 1);
  FIELD(D, coll.user_tag, 128, 8);
  FIELD(D, p2p, 24, 56);
  FIELD(D, p2p.parent_group, 64, 8);
  FIELD(D, p2p.user_tag, 72, 8);
  FIELD(D, ce_coll, 24, 96);
  FIELD(D, ce_coll.stream, 104, 8);
  FIELD(D, ce_coll.user_tag, 112, 8);
  FIELD(D, ce_coll_batch.use_intra_sync, 40, 1);
  FIELD(D, kernel_phase, 24, 24);
  FIELD(D, kernel_phase.channel_id, 24, 1);
  FIELD(D, kernel_phase.phase_id, 25, 1);
  FIELD(D, kernel_phase.phase_name, 32, 8);
  FIELD(D, kernel_phase.gpu_timer, 40, 8);
  using S = np::StateArgsV7;
  STATIC_REQUIRE(sizeof(S) == 8);
  FIELD(S, kernel_ch.gpu_timer, 0, 8);
}

TEST_CASE("profiler plugin event kinds and states have NCCL's values (nccl_profiler.h)", "[profiler_layout]") {
  STATIC_REQUIRE(np::kColl == 2);
  STATIC_REQUIRE(np::kKernelCh == 64);
  STATIC_REQUIRE(np::kGroupApi == 256);
  STATIC_REQUIRE(np::kCollApi == 512);
  STATIC_REQUIRE(np::kP2pApi == 1024);
  STATIC_REQUIRE(np::kKernelLaunch == 2048);
  STATIC_REQUIRE(np::kCeBatch == 16384);
  STATIC_REQUIRE(np::kKernelPhase == 32768);  // 2.32.3's DWARF
  STATIC_REQUIRE(np::kProxyCtrlAppendEnd == 18);
  STATIC_REQUIRE(np::kProxyOpInProgress == 19);
  STATIC_REQUIRE(np::kKernelChStop == 22);
  STATIC_REQUIRE(np::kGroupEndApiStart == 24);
  STATIC_REQUIRE(np::kCeBatchComplete == 30);
  STATIC_REQUIRE(np::kKernelPhaseStop == 31);  // 2.32.3's DWARF
}
