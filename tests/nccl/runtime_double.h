// Switches of the runtime test double (runtime_double.cpp).
#pragma once

#include <cstdint>

#include "runtime.h"

namespace traintime::rt::testing {

extern core::Config g_config;  // g_config.nccl = false is TRAINTIME_NCCL=0
extern bool g_active;
extern int g_marked;           // mark_recorded() calls
extern int64_t g_comm_rank;    // last set_rank_from_communicator()
extern int64_t g_comm_world;
extern RankFileFiller g_filler;

}  // namespace traintime::rt::testing
