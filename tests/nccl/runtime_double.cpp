// The slice of preload/runtime.h the NCCL files use, as a test double: the white-box wrapper test
// links the NCCL sources without the rest of libtraintime.so, so it can read the call table and
// the thread's NcclCall directly. Tests flip the switches below.
#include "runtime_double.h"

#include <cerrno>

namespace traintime::rt {

namespace testing {
core::Config g_config;
bool g_active = true;
int g_marked = 0;
int64_t g_comm_rank = -1;
int64_t g_comm_world = 0;
RankFileFiller g_filler = nullptr;
}  // namespace testing

bool active() { return testing::g_active; }
const core::Config& config() { return testing::g_config; }
// The real ones do file and environment work that may leave errno changed: so do these, and the
// wrappers must hide it.
void mark_recorded() {
  ++testing::g_marked;
  errno = EBADF;
}
void set_rank_from_communicator(int64_t rank, int64_t world_size) {
  errno = EBADF;
  testing::g_comm_rank = rank;
  testing::g_comm_world = world_size;
}
void add_rank_file_filler(RankFileFiller filler) { testing::g_filler = filler; }
void gpu_start_point() noexcept {}

}  // namespace traintime::rt
