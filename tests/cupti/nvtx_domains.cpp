// Test program for NVTX domains (issue 10 item 7), with the toolkit's real nvtx3 headers and no
// CUDA; test_nvtx_ranges.py runs it under LD_PRELOAD=libtraintime.so. Within one "step" range per
// iteration it makes what a PyTorch job with NCCL does:
//   - NCCL's own domain wraps a communication call: a range "ncclAllReduce" in domain "NCCL";
//   - two domains interleave: "app" opens "outer", "lib" opens "inner" inside it, then "app"
//     pops first (closing "outer" below "inner"), then "lib" pops;
//   - PyTorch emit_nvtx names: "aten::add, seq = N, op_id = M" with a new N every call, from a
//     new buffer every call (as Python strings arrive).
// It checks the levels NVTX returns and exits 1 with a message when one is wrong.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
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

int main(int argc, char** argv) {
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
