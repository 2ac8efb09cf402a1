// Asking the CUDA driver whether a stream is being captured into a graph, for the NCCL wrappers.
// (Their real functions come from support::RealSymbol, support/real_symbol.h.) Adds no
// DT_NEEDED: it looks only at what the process has already loaded.
#pragma once

#include <atomic>

#include "traintime/support/real_symbol.h"

namespace traintime::nccl {

using support::RealSymbol;

// True when the CUDA driver says `stream` is being captured into a graph (active capture).
// Uses cuStreamIsCapturing from an already loaded libcuda.so.1 (dlopen RTLD_NOLOAD), never the
// runtime's cudaStreamIsCapturing, whose failures would set cudaGetLastError() under the app.
// False when libcuda is not loaded, lacks the symbol, or the query fails. errno is preserved.
bool ask_is_capturing(void* stream) noexcept;
// 1 while GPU capture watches every capture begin and none has begun: no stream can be
// capturing, and the driver is not asked (set_capture_watch, note_capture_begin).
extern std::atomic<int> g_capture_unseen;
// Inline: a wrapper's common case is one load.
inline bool stream_is_capturing(void* stream) noexcept {
  // The capture begin's callback ran before its API returned, so a call on a stream it made
  // capturing (ordered after it by the application) reads 0 here.
  if (g_capture_unseen.load(std::memory_order_acquire) != 0) return false;
  return ask_is_capturing(stream);
}

}  // namespace traintime::nccl
