// The one line a job that recorded nothing ends with (DESIGN §2). A CPU job without annotations
// under the preload alone records nothing (no CUDA work, no NCCL call, no region) and so writes
// nothing; without this line the user finds an empty or missing folder and no reason.
//
// Only the process the user started under the preload says it: the first preloaded process of
// the tree marks itself for its children (TRAINTIME_ROOT_PID=<its pid>, kept across its own
// exec), so ranks, DataLoader workers, shells and compilers started by it never do. It says it
// at exit, when it recorded nothing itself, has no launcher rank variables, and no rank file of
// the job is in the output directory, and only when it is a Python interpreter or started child
// processes (a launcher: mpirun, torchrun, a shell script, whose children inherit the preload
// and have ended by then). A plain program (/bin/true, a compiler) that records nothing stays
// silent, as DESIGN §2 wants.
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "session.h"
#include "traintime/support/log.h"

namespace traintime::preload {
namespace {

constexpr const char* kRootVar = "TRAINTIME_ROOT_PID";
// A rank file counts as this job's when it changed after the process started, less this much
// (file times come from a coarse clock; a file of an earlier run is older than this by far).
constexpr uint64_t kFileClockSlackNs = 2'000'000'000ull;

pid_t g_root_pid = 0;  // this process's pid when it is the one the user started, else 0

bool started_children() {
  // Children that ended and were waited for (a launcher waits for its ranks): the kernel keeps
  // their resource usage, and any process that ran had a resident set.
  struct rusage ru;
  return getrusage(RUSAGE_CHILDREN, &ru) == 0 && ru.ru_maxrss > 0;
}

bool is_python() { return dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr; }

std::string output_dir(const core::Config& c) {
  std::string dir = c.output_dir;
  if (!dir.empty() && dir[0] == '/') return dir;
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + dir : dir;
}

bool ends_with(const char* s, const char* suffix) {
  const std::size_t n = std::strlen(s), m = std::strlen(suffix);
  return n >= m && std::strcmp(s + n - m, suffix) == 0;
}

// A rank file (or a running rank's always-current record) written since this process started.
bool job_wrote_rank_file(const std::string& dir, uint64_t since_unix_ns) {
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (const dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "rank-", 5) != 0) continue;
    if (!ends_with(e->d_name, ".json") && !ends_with(e->d_name, ".live")) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, 0) != 0) continue;
    const uint64_t mtime = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull +
                           static_cast<uint64_t>(st.st_mtim.tv_nsec);
    if (mtime + kFileClockSlackNs >= since_unix_ns) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

void at_exit() {
  if (g_root_pid == 0 || getpid() != g_root_pid) return;  // a fork child inherited the handler
  Session* s = g_session.load(std::memory_order_acquire);
  if (!s || s->recorder.activated.load(std::memory_order_acquire)) return;
  const int saved = errno;
  const ProcessIdentity& id = s->identity;
  if (!id.launcher_rank.from_launcher && (started_children() || is_python())) {
    const std::string dir = output_dir(id.config);
    if (!job_wrote_rank_file(dir, id.load_unix_ns))
      support::log_warn(
          "nothing was recorded (no CUDA work, no NCCL call, no annotated region), so no rank file was "
          "written to {}: add traintime.torch.instrument(model, optimizer) to a PyTorch loop, or "
          "traintime.region(\"forward\") and traintime.step() (C: tt_push, tt_pop, tt_step) around "
          "your training step (README: Quickstart)",
          dir);
  }
  errno = saved;
}

}  // namespace

void note_process_root() {
  const pid_t self = getpid();
  const char* marked = getenv(kRootVar);
  if (marked && *marked) {
    char* end = nullptr;
    const long pid = std::strtol(marked, &end, 10);
    // The user's process exec'd another program (a shell's `exec python ...`): still the root.
    if (end == marked || *end != '\0' || pid != static_cast<long>(self)) return;
  } else {
    const std::string text = std::to_string(self);
    setenv(kRootVar, text.c_str(), 1);
  }
  g_root_pid = self;
  std::atexit(at_exit);
}

}  // namespace traintime::preload
