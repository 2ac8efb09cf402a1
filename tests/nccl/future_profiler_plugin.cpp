// A profiler plugin for the tests that offers only a version traintime does not know
// (ncclProfiler_v9, standing for a newer NCCL's): traintime must leave it to NCCL and warn once.
// Its table is never called here, so its layout does not matter.
extern "C" {
__attribute__((visibility("default"))) const char* ncclProfiler_v9[6] = {"future", nullptr, nullptr,
                                                                          nullptr, nullptr, nullptr};
}
