// Test program for the NVTX injection (nvtx/src/nvtx_injection.cpp): every NVTX flavour a
// library may use — push/pop (ASCII, wide), domain push/pop with ASCII and registered strings
// (NCCL and the Python nvtx package use those), start/end ranges — inside one "step" range per
// iteration. No CUDA. test_nvtx_ranges.py runs it under LD_PRELOAD=libtraintime.so.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

int main() {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("tt_test_domain");
  nvtxStringHandle_t registered = nvtxDomainRegisterStringA(domain, "registered_forward");
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("step");

    nvtxEventAttributes_t a = {};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = registered;
    nvtxDomainRangePushEx(domain, &a);
    nvtxDomainRangePop(domain);

    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "domain_backward";
    nvtxDomainRangePushEx(domain, &a);
    nvtxDomainRangePop(domain);

    nvtxRangePushW(L"wide_optimizer");
    nvtxRangePop();

    nvtxRangeId_t r = nvtxRangeStartA("async_io");
    nvtxRangeEnd(r);

    nvtxRangePop();
  }
  std::printf("nvtx_ranges: done\n");
  return 0;
}
