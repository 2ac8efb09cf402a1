// Asking the CUDA driver whether a stream is being captured into a graph, for the NCCL wrappers.
// (Their real functions come from support::RealSymbol, support/real_symbol.h.) Adds no
// DT_NEEDED: it looks only at what the process has already loaded.
#pragma once

#include "traintime/support/real_symbol.h"

namespace traintime::nccl {

using support::RealSymbol;

// True when the CUDA driver says `stream` is being captured into a graph (active capture).
// Uses cuStreamIsCapturing from an already loaded libcuda.so.1 (dlopen RTLD_NOLOAD), never the
// runtime's cudaStreamIsCapturing, whose failures would set cudaGetLastError() under the app.
// False when libcuda is not loaded, lacks the symbol, or the query fails. errno is preserved.
bool stream_is_capturing(void* stream) noexcept;

}  // namespace traintime::nccl
