// Run under LD_PRELOAD=libtraintime.so with the toolkit's real libnccl.so.2: the application
// dlopen()s NCCL with RTLD_LOCAL (as a Python extension's dependency is loaded), so RTLD_NEXT
// cannot see it, then calls the entry points it finds by name in the global scope (our
// wrappers). The wrappers must find the real NCCL through dlopen(RTLD_NOLOAD) and return exactly
// what it returns. ncclGroupStart/End need no GPU. Where the library has NCCL 2.32's *Config
// collectives and one-sided calls, each is called on a NULL communicator, which NCCL refuses
// before touching a GPU: the wrapper must return what the real function returns (not the
// missing-function answer). Exit 0 on success, 1 with a message.
#include <dlfcn.h>
#include <nccl.h>

#include <cerrno>
#include <cstdio>

#include "traintime/nccl/nccl_2_32.h"

using GroupFn = ncclResult_t (*)();

namespace {

// The wrapper (found in the global scope) and the real function of `name` give the same result
// for the same call; false, with a message, when not.
template <typename Fn, typename Call>
bool same_result(void* nccl, const char* name, Call&& call) {
  auto real = reinterpret_cast<Fn>(dlsym(nccl, name));
  auto wrapped = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
  if (real == nullptr) return true;  // an older NCCL: nothing to compare
  if (wrapped == nullptr || wrapped == real) {
    std::printf("%s: the preloaded wrapper is not in the global scope\n", name);
    return false;
  }
  const ncclResult_t r = call(real);
  const ncclResult_t w = call(wrapped);
  std::printf("%s on a NULL communicator: wrapped %d, real %d\n", name, w, r);
  return w == r && r != ncclSuccess;
}

bool v2_32_calls_pass_through(void* nccl) {
  char buf[16];
  bool ok = true;
  ok &= same_result<decltype(&ncclAllReduceConfig)>(nccl, "ncclAllReduceConfig", [&](auto fn) {
    return fn(buf, buf, 1, ncclFloat32, ncclSum, nullptr, nullptr, nullptr);
  });
  ok &= same_result<decltype(&ncclAllGatherConfig)>(nccl, "ncclAllGatherConfig", [&](auto fn) {
    return fn(buf, buf, 1, ncclFloat32, nullptr, nullptr, nullptr);
  });
  ok &= same_result<decltype(&ncclPutSignal)>(nccl, "ncclPutSignal", [&](auto fn) {
    return fn(buf, 1, ncclFloat32, 0, nullptr, 0, 0, 0, 0, nullptr, nullptr);
  });
  ok &= same_result<decltype(&ncclSignal)>(nccl, "ncclSignal",
                                           [&](auto fn) { return fn(0, 0, 0, 0, nullptr, nullptr); });
  ok &= same_result<decltype(&ncclWaitSignal)>(nccl, "ncclWaitSignal", [&](auto fn) {
    ncclWaitSignalDesc_t desc{1, 0, 0, 0};
    return fn(1, &desc, nullptr, nullptr);
  });
  return ok;
}

}  // namespace

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
  return ok && v2_32_calls_pass_through(nccl) ? 0 : 1;
}
