// --trace FILE: a Chrome/Perfetto JSON trace of the ranks that kept a TRAINTIME_TRACE=1 timeline
// (docs/attribution.md "Trace dump"), one process per rank, GPU streams and regions as tracks.
#pragma once

#include <string>
#include <vector>

#include "job.h"

namespace traintime::report {

// Writes the trace of every merged rank that has a rank-*.trace.json beside its rank file.
// Returns the number of ranks written (0: none had a trace, or the file could not be written;
// `problems` then says why, one line each naming the file).
std::size_t export_trace(const Job& job, const std::string& out_path, std::vector<std::string>& problems);

}  // namespace traintime::report
