// Where each channel of a collective in flight has got to, from NCCL's proxy events (ProxyOp,
// ProxyStep) and kernel-channel events (KernelCh), for the hang report (rank file
// proxy_progress, docs/schema.md).
//
// NCCL (src/transport/net.cc, src/proxy.cc, src/plugin/profiler.cc) starts a ProxyOp per
// channel and peer when its proxy thread takes a network operation (nSteps steps of chunkSize
// bytes, send or receive), records ProxyOpInProgress when it begins to progress it, and stops it
// when every step is done. With ProxyStep on, each step is started when the proxy posts it, its
// states are recorded as it moves (send: SendGPUWait, SendPeerWait, SendWait; receive: RecvWait,
// RecvFlushWait, RecvGPUWait, the bytes in transSize) and it is stopped when done. Intra-node
// transports (P2P, SHM, NVLS) have no proxy: only KernelCh says which channels never finished.
// NCCL reads the activation mask when it enqueues a collective: ProxyStep switched on applies to
// the collectives enqueued after, never to one already in flight.
//
// A ProxyOp whose descriptor pid is not this process's comes from another process (PXN: NCCL's
// proxy here progresses a peer's operation): its parent and its context are that process's
// pointers and are never read; the row is kept without a communicator.
//
// Threads: rows are written on NCCL's proxy thread (and, for KernelCh, whichever thread NCCL
// uses) without a lock or an allocation: a fixed table whose rows are claimed with one CAS and
// freed at the op's stop, or, for an op NCCL never stops (a communicator aborted or destroyed in
// the middle of a collective), when its communicator's plugin context is finalized (free_owner):
// so communicators that come and go never fill the table with rows of theirs. summary() reads them on the thread assembling the rank file; a row
// read while it moves may mix two moments of it (figures, never a crash).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "traintime/core/rank_file.h"
#include "traintime/nccl/proxy_progress_section.h"
#include "traintime/core/section.h"

namespace traintime::nccl::proxy {

inline constexpr uint32_t kRows = 1024;             // rows in flight at once (beyond: counted, dropped)
inline constexpr uint32_t kNone = 0;                // no row
inline constexpr uint32_t kSuspectCollectives = 512;  // ProxyStep stays on this long once suspected (auto)

enum class Mode : uint8_t { kAuto, kOn, kOff };

// At the module's configure (TRAINTIME_NCCL_PROXY_STEPS: "auto", "on", "off") and in a fork child.
void configure(std::string_view mode) noexcept;

// The activation-mask bits traintime asks NCCL for on top of its own: ProxyOp always, ProxyStep
// while on (Mode::kOn, or auto after suspect()). KernelCh is asked for by the plugin's own mask
// (kernel_ch_times.h: on except on NCCL 2.31.x unless asked); its rows here come with it.
int mask_bits() noexcept;

// A rank is suspected (a collective in flight past half of TRAINTIME_HANG_SEC: kHang; a wait far
// beyond its recent durations, core/straggler_sign.h: kStraggler): with auto, ProxyStep is asked
// for the next kSuspectCollectives collectives NCCL enqueues.
enum class Suspicion : uint8_t { kHang, kStraggler };
void suspect(Suspicion why = Suspicion::kHang) noexcept;
// One collective or p2p task enqueued (its task event): counts down auto's budget.
void note_task() noexcept;

// The owner of a plugin context's rows (one per communicator's context, never 0), and freeing
// every row it still holds (at the context's finalize: NCCL stops no event after it).
uint32_t new_owner() noexcept;
void free_owner(uint32_t owner) noexcept;

// Events. `owner` is the row's context (new_owner; 0: none, a PXN op); `comm` the call-table
// index + 1 of the communicator (0: not known); `op` and `seq` the parent task's CommOp and NCCL
// seqNumber (kUnknown when not known). Each start returns a row (kNone when the table was full);
// the others accept kNone.
uint32_t start_op(uint32_t owner, uint32_t comm, int rank, uint8_t op, uint64_t seq, uint8_t channel, int peer,
                  int n_steps, bool is_send, bool pxn) noexcept;
void op_state(uint32_t row, int state) noexcept;
void stop_op(uint32_t row) noexcept;
// A step of a row: posted at its start; `bytes` of a state's transSize kept by the caller and
// added at the step's stop (done).
void start_step(uint32_t row, int step) noexcept;
void step_state(uint32_t row, int state) noexcept;
void stop_step(uint32_t row, uint64_t bytes) noexcept;
uint32_t start_kernel_channel(uint32_t owner, uint32_t comm, int rank, uint8_t op, uint64_t seq,
                              uint8_t channel) noexcept;
void stop_kernel_channel(uint32_t row) noexcept;

// The rows in flight now (rank file proxy_progress, each with its communicator's call-table
// index or CommCallTable::kNoComm), the mode as applied, and the counters of the nccl section.
struct Summary {
  std::vector<std::pair<uint32_t, ProxyProgress>> rows;
  std::string_view mode;
};
Summary summary(core::Section& section);

// The state's name in the rank file ("send_wait", ...; docs/schema.md).
std::string_view state_name(int state) noexcept;

}  // namespace traintime::nccl::proxy
