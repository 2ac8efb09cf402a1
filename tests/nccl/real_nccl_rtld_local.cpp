// Run under LD_PRELOAD=libtraintime.so with the toolkit's real libnccl.so.2: the application
// dlopen()s NCCL with RTLD_LOCAL (as a Python extension's dependency is loaded), so RTLD_NEXT
// cannot see it, then calls the entry points it finds by name in the global scope (our
// wrappers). The wrappers must find the real NCCL through dlopen(RTLD_NOLOAD) and return exactly
// what it returns. ncclGroupStart/End need no GPU. Exit 0 on success, 1 with a message.
#include <dlfcn.h>
#include <nccl.h>

#include <cerrno>
#include <cstdio>

using GroupFn = ncclResult_t (*)();

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* nccl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (nccl == nullptr) {
    std::printf("cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  auto real_start = reinterpret_cast<GroupFn>(dlsym(nccl, "ncclGroupStart"));
  auto real_end = reinterpret_cast<GroupFn>(dlsym(nccl, "ncclGroupEnd"));
  auto start = reinterpret_cast<GroupFn>(dlsym(RTLD_DEFAULT, "ncclGroupStart"));
  auto end = reinterpret_cast<GroupFn>(dlsym(RTLD_DEFAULT, "ncclGroupEnd"));
  if (start == nullptr || end == nullptr || start == real_start) {
    std::printf("the preloaded wrappers are not in the global scope\n");
    return 1;
  }
  // NCCL's first call initialises it (and may set errno); take that out of the comparison.
  real_start();
  real_end();
  errno = 4242;
  const ncclResult_t s = start();
  const int s_errno = errno;
  const ncclResult_t e = end();
  const ncclResult_t unbalanced = end();  // NCCL: ncclInvalidUsage outside a group
  const ncclResult_t real_unbalanced = real_end();
  std::printf("wrapped: start=%d (errno %d) end=%d unbalanced end=%d; real unbalanced end=%d\n", s,
              s_errno, e, unbalanced, real_unbalanced);
  const bool ok = s == ncclSuccess && e == ncclSuccess && s_errno == 4242 &&
                  unbalanced == real_unbalanced && unbalanced != ncclSuccess;
  return ok ? 0 : 1;
}
