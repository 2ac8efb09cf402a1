// Test program for NVTX domains (issue 10 item 7), with the toolkit's real nvtx3 headers and no
// CUDA; test_nvtx_ranges.py runs it under LD_PRELOAD=libtraintime.so. Within one "step" range per
// iteration it makes what a PyTorch job with NCCL does:
//   - NCCL's own domain wraps a communication call: a range "ncclAllReduce" in domain "NCCL";
//   - two domains interleave: "app" opens "outer", "lib" opens "inner" inside it, then "app"
//     pops first (closing "outer" below "inner"), then "lib" pops;
//   - PyTorch emit_nvtx names: "aten::add, seq = N, op_id = M" with a new N every call, from a
//     new buffer every call (as Python strings arrive).
// It checks the levels NVTX returns and exits 1 with a message when one is wrong.
#include <sys/wait.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int push(nvtxDomainHandle_t domain, const char* name) {
  nvtxEventAttributes_t a = {};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  return nvtxDomainRangePushEx(domain, &a);
}

bool expect(int got, int want, const char* what) {
  if (got == want) return true;
  std::printf("nvtx_domains: %s returned %d, want %d\n", what, got, want);
  return false;
}

}  // namespace

// --fork: NVTX state open across fork(). The parent opens 300 nested ranges (44 beyond the 256
// tracked: untracked_ranges) and closes them, then forks while inside a push range
// "parent_open" and a start range "parent_range". The first child ends both (the parent's
// ranges) and exits: it recorded nothing of its own, so it must write no file. The second ends
// them too, then records a range "child_work" of its own. The parent waits for both, then ends
// its two ranges. Prints "child PID" per child.
int fork_with_state_open() {
  for (int i = 0; i < 300; ++i) nvtxRangePushA("deep");
  for (int i = 0; i < 300; ++i) nvtxRangePop();
  nvtxRangePushA("parent_open");
  const nvtxRangeId_t range = nvtxRangeStartA("parent_range");
  std::fflush(stdout);
  bool ok = true;
  for (int child = 0; child < 2; ++child) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      // NVTX's answer for a pop with nothing open in the child: -1 (the parent's range is not
      // the child's).
      const int level = nvtxRangePop();
      nvtxRangeEnd(range);
      if (child == 1) {
        nvtxRangePushA("child_work");
        nvtxRangePop();
      }
      std::exit(level == -1 ? 0 : 3);
    }
    std::printf("child %d\n", static_cast<int>(pid));
    std::fflush(stdout);  // not printed again by the next child at its exit
    int status = 0;
    ok = waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
    if (!ok) std::printf("nvtx_domains: child %d ended with status %d\n", child, status);
  }
  ok = expect(nvtxRangePop(), 0, "the parent's pop of its own range after the fork") && ok;
  nvtxRangeEnd(range);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--fork") return fork_with_state_open();
  if (argc > 1 && std::string(argv[1]) == "--deep") {
    // 300 nested ranges: the ones beyond 256 open at once are counted, not recorded, and the
    // pops still balance.
    for (int i = 0; i < 300; ++i) nvtxRangePushA("deep");
    for (int i = 0; i < 300; ++i) nvtxRangePop();
    nvtxRangePushA("after");
    nvtxRangePop();
    return 0;
  }
  nvtxDomainHandle_t nccl = nvtxDomainCreateA("NCCL");
  nvtxDomainHandle_t app = nvtxDomainCreateA("app");
  nvtxDomainHandle_t lib = nvtxDomainCreateA("lib");
  bool ok = nccl != nullptr && app != nullptr && lib != nullptr;
  if (!ok) std::printf("nvtx_domains: nvtxDomainCreateA returned a null handle\n");
  int seq = 0;
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("step");

    push(nccl, "ncclAllReduce");
    ok = expect(nvtxDomainRangePop(nccl), 0, "NCCL pop") && ok;

    ok = expect(push(app, "outer"), 0, "app push") && ok;
    ok = expect(push(lib, "inner"), 0, "lib push (first in its domain)") && ok;
    ok = expect(nvtxDomainRangePop(app), 0, "app pop below lib's range") && ok;
    ok = expect(nvtxDomainRangePop(lib), 0, "lib pop") && ok;

    for (int k = 0; k < 10; ++k) {
      ++seq;
      const std::string name =
          "aten::add, seq = " + std::to_string(seq) + ", op_id = " + std::to_string(seq * 3);
      nvtxRangePushA(name.c_str());
      nvtxRangePop();
    }

    nvtxRangePop();
  }
  // A pop in a domain with nothing open: NVTX's answer is -1, and nothing else is closed.
  ok = expect(nvtxDomainRangePop(app), -1, "pop with nothing open") && ok;
  std::printf("nvtx_domains: done\n");
  return ok ? 0 : 1;
}
