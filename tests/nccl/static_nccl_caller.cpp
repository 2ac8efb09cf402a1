// Run under LD_PRELOAD=libtraintime.so (tests/nccl/test_static_nccl.py says what each mode
// proves). argv: MODE HOST_LIB GLOBAL_NCCL
//   static       dlopen HOST_LIB (NCCL inside it) RTLD_LOCAL and run its training calls;
//   static+other the same after another NCCL (GLOBAL_NCCL) was loaded RTLD_GLOBAL;
//   none         no NCCL anywhere: call the wrapper found by name, twice.
// Prints what each NCCL saw; exit 0 when every call went to the right NCCL and succeeded.
#include <dlfcn.h>
#include <nccl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

using CallsFn = int (*)(const char*);
using RunFn = int (*)();

int calls(void* lib, const char* function) {
  auto fn = reinterpret_cast<CallsFn>(dlsym(lib, "fake_nccl_calls"));
  return fn != nullptr ? fn(function) : -1;
}

int run_none() {
  using GroupFn = ncclResult_t (*)();
  auto start = reinterpret_cast<GroupFn>(dlsym(RTLD_DEFAULT, "ncclGroupStart"));
  if (start == nullptr) {
    std::printf("the preloaded wrappers are not in the global scope\n");
    return 1;
  }
  errno = 0;
  const ncclResult_t first = start();
  const int first_errno = errno;
  const ncclResult_t second = start();
  std::printf("none: %d (errno %d) then %d\n", first, first_errno, second);
  return first == ncclSystemError && second == ncclSystemError && first_errno == ENOSYS ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::string mode = argv[1];
  if (mode == "none") return run_none();
  void* other = nullptr;
  if (mode == "static+other") {
    other = dlopen(argv[3], RTLD_NOW | RTLD_GLOBAL);
    if (other == nullptr) {
      std::printf("cannot load %s: %s\n", argv[3], dlerror());
      return 1;
    }
  }
  void* host = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (host == nullptr) {
    std::printf("cannot load %s: %s\n", argv[2], dlerror());
    return 1;
  }
  auto run = reinterpret_cast<RunFn>(dlsym(host, "static_nccl_host_run"));
  const int rc = run != nullptr ? run() : 99;
  const int host_allreduce = calls(host, "ncclAllReduce");
  const int host_init = calls(host, "ncclCommInitRank");
  const int other_allreduce = other != nullptr ? calls(other, "ncclAllReduce") : 0;
  std::printf("host run: %d; host NCCL saw %d AllReduce, %d InitRank; other NCCL saw %d AllReduce\n",
              rc, host_allreduce, host_init, other_allreduce);
  return rc == 0 && host_allreduce == 3 && host_init == 1 && other_allreduce == 0 ? 0 : 1;
}
