// NVTX ranges become traintime regions (DESIGN §3). The preload's InitializeInjectionNvtx2
// entry point (NVTX_INJECTION64_PATH) hands each NVTX-carrying module's export-table getter and
// the annotation table to inject(); from then on that module's NVTX calls reach the regions.
#pragma once

#include <cstdint>

#include "traintime/traintime.h"

namespace traintime::nvtx {

// NVTX's NvtxGetExportTableFunc_t (nvtxTypes.h), spelt without NVTX's headers.
using GetExportTable = const void* (*)(uint32_t export_table_id);

// Writes traintime's handlers into the calling module's NVTX function tables. `api` is the
// annotation table every handler records through (the same one traintime.h dispatches to); the
// first call fixes it for the process. Returns 1 when handlers were installed (NVTX's
// convention), 0 otherwise. Thread-safe; errno untouched.
int inject(const tt_api_v1* api, GetExportTable get_export_table);

}  // namespace traintime::nvtx
