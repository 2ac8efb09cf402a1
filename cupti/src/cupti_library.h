// Finding, loading and checking libcupti (DESIGN §2). Nothing links against CUPTI: every entry
// point is resolved with dlsym into one table, so libtraintime.so carries no DT_NEEDED on it and
// a process that never initialises CUDA never loads it.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace traintime::cupti {

// How activity records are laid out in the loaded libcupti's buffers. Records are decoded only
// for the releases in the compiled table of checked layouts (cupti_layouts.h): each one's record
// sizes were read off that release's own cuptiActivityGetNextRecord, and every field the
// decoder reads sits at the same offset in all of them (static_asserted against the headers).
// Any other version gives gpu_capture "unavailable" instead of numbers read through a wrong struct.
enum class RecordLayout : uint8_t {
  kUnknown,
  kCupti12Memcpy5,  // CUPTI 12.1-12.6 (API 18-24): Kernel9, Memcpy5, MemcpyPtoP4, Memset4
  kCupti12Memcpy6,  // CUPTI 12.8-12.9 (API 26-28): Kernel9, Memcpy6, MemcpyPtoP4, Memset4
  kCupti13_0,       // CUPTI 13.0.x (API 130000-130099): Kernel10, Memcpy6, MemcpyPtoP4, Memset4
  kCupti13_1,       // CUPTI 13.1-13.2 (API 130100-130299): Kernel11, Memcpy6, MemcpyPtoP4, Memset4
  kCupti13_3,       // CUPTI 13.3 (API 130300-130399): Kernel12, Memcpy6, MemcpyPtoP4, Memset4
  kCupti13_4,       // CUPTI 13.4-13.5 (API 130400-130599): Kernel13, Memcpy7, MemcpyPtoP4, Memset5
};

// The layout for a cuptiGetVersion() value; kUnknown (with *why filled) for any other version.
RecordLayout layout_for_version(uint32_t api_version, std::string* why);
const char* layout_name(RecordLayout layout);

// Record sizes of a layout by kind, as its release's cuptiActivityGetNextRecord steps over them.
// The 13.1+ structs are newer than the toolkit's headers: their sizes are constants here, checked
// against each release's own cupti_activity.h by tests/cupti (cupti_layout_probe.cpp).
struct LayoutSizes {
  uint32_t kernel, memcpy, memcpy_ptop, memset;
};
LayoutSizes layout_sizes(RecordLayout layout);

// Every CUPTI function the adapter calls. Required ones: a library missing one is unusable.
#define TRAINTIME_CUPTI_FUNCTIONS(X)     \
  X(cuptiGetVersion)                     \
  X(cuptiGetResultString)                \
  X(cuptiGetCallbackName)                \
  X(cuptiSubscribe)                      \
  X(cuptiUnsubscribe)                    \
  X(cuptiEnableCallback)                 \
  X(cuptiActivityEnable)                 \
  X(cuptiActivityDisable)                \
  X(cuptiActivityRegisterCallbacks)      \
  X(cuptiActivityGetNextRecord)          \
  X(cuptiActivityFlushAll)               \
  X(cuptiActivityGetNumDroppedRecords)   \
  X(cuptiGetGraphNodeId)

// Optional ones (nullptr when absent). cuptiActivityEnableRuntimeApi/EnableDriverApi (13.0 has
// both) turn on API records for the launch cbids only, which guarantees that CUPTI assigns the
// correlation ids the launch callbacks see; a library without them (simgpu) assigns them anyway.
#define TRAINTIME_CUPTI_OPTIONAL_FUNCTIONS(X) \
  X(cuptiActivityEnableRuntimeApi)            \
  X(cuptiActivityEnableDriverApi)             \
  X(cuptiActivitySetAttribute)                \
  X(cuptiSubscribe_v2)                        \
  X(cuptiEnableDomain)                        \
  X(cuptiGetCallbackState)                    \
  X(cuptiActivityRegisterTimestampCallback)  \
  X(cuptiGetTimestamp)

struct CuptiApi {
#define TRAINTIME_CUPTI_MEMBER(name) decltype(&::name) name = nullptr;
  TRAINTIME_CUPTI_FUNCTIONS(TRAINTIME_CUPTI_MEMBER)
  TRAINTIME_CUPTI_OPTIONAL_FUNCTIONS(TRAINTIME_CUPTI_MEMBER)
#undef TRAINTIME_CUPTI_MEMBER
};

class CuptiLibrary {
 public:
  // Finds a usable libcupti, in this order (DESIGN §2; never the build machine's toolkit before
  // what the user's environment names):
  //   1. one the process already has (PyTorch wheels ship their own): used even when
  //      `explicit_path` names another, with a warning, since two CUPTIs cannot share a process;
  //   2. `explicit_path` (TRAINTIME_CUPTI_LIB);
  //   3. the dynamic loader's search path (LD_LIBRARY_PATH, ld.so.cache) by soname: 13, then 12;
  //   4. $CUDA_HOME, /usr/local/cuda, then the toolkit traintime was built against
  //      (lib64/ and extras/CUPTI/lib64/, soname 13 then 12).
  // A candidate that does not load, lacks a function, or reports a version whose record layout
  // this build cannot vouch for gives way to the next one; if none is usable, *reason lists
  // each with why. path() is then the file that was used (resolved through the loader).
  // TRAINTIME_CUPTI_LIB refused while another is used is warned about once, naming both.
  bool load(const std::string& explicit_path, std::string* reason);

  const CuptiApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  bool reused() const { return reused_; }
  uint32_t version() const { return version_; }
  RecordLayout layout() const { return layout_; }
  const char* result_string(CUptiResult rc) const;
  // "CUPTI <version> (<path>)" of the library in use (gpu_capture_reason).
  std::string describe() const;
  // "TRAINTIME_CUPTI_LIB=<path> not used (<why>)" when another library is used; else empty.
  const std::string& explicit_note() const { return explicit_note_; }

 private:
  bool resolve(void* handle, std::string* reason);
  // Resolves the entry points and checks the version of the library `handle`, named path_.
  bool use(void* handle, std::string* reason);

  CuptiApi api_;
  std::string path_;
  bool reused_ = false;
  uint32_t version_ = 0;
  RecordLayout layout_ = RecordLayout::kUnknown;
  std::string explicit_note_;  // TRAINTIME_CUPTI_LIB named a library that was refused
};

// One per call site (TRAINTIME_CUPTI_CALL makes it): a failing call is logged once, with the
// site and CUPTI's own result string; later failures at the same site stay silent.
struct CallSite {
  const char* function;
  const char* file;
  int line;
  std::atomic<bool> logged{false};
};

// The single checked-call helper every CUPTI call goes through. `expected` is a non-success
// result that is part of normal operation at that site (e.g. the end of a buffer) and is
// returned without logging.
CUptiResult checked(const CuptiLibrary& lib, CallSite& site, CUptiResult rc,
                    CUptiResult expected = CUPTI_SUCCESS);

}  // namespace traintime::cupti

// TRAINTIME_CUPTI_CALL(lib, cuptiX, args...) calls lib.api().cuptiX(args...) through checked().
#define TRAINTIME_CUPTI_CALL(lib, fn, ...)                                                   \
  ([&]() -> CUptiResult {                                                                     \
    static ::traintime::cupti::CallSite tt_site_{#fn, __FILE__, __LINE__};                    \
    return ::traintime::cupti::checked((lib), tt_site_, (lib).api().fn(__VA_ARGS__));         \
  }())

// The same, for a site where `expected_rc` is a normal outcome that must not be logged.
#define TRAINTIME_CUPTI_CALL_EXPECT(lib, expected_rc, fn, ...)                                \
  ([&]() -> CUptiResult {                                                                     \
    static ::traintime::cupti::CallSite tt_site_{#fn, __FILE__, __LINE__};                    \
    return ::traintime::cupti::checked((lib), tt_site_, (lib).api().fn(__VA_ARGS__),          \
                                       (expected_rc));                                        \
  }())
