#include "cupti_library.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <cupti_activity_deprecated.h>

#include "traintime/support/log.h"

#ifndef TRAINTIME_CUDA_ROOT
#define TRAINTIME_CUDA_ROOT "/usr/local/cuda"
#endif

namespace traintime::cupti {

namespace {

// The releases whose record layouts were checked, by the API version their libcupti reports
// (the PyPI wheels nvidia-cuda-cupti-cu12 12.1.105, 12.2.142, 12.3.101, 12.4.127, 12.6.80,
// 12.8.90, 12.9.79, the CUDA 13.0 toolkit, and nvidia-cuda-cupti 13.1.115, 13.2.86, 13.3.75,
// 13.4.92, 13.5.25: scripts/fetch-cupti-releases.py). tests/cupti checks each layout against the
// release's own headers (record sizes, and the offset of every field the decoder reads) and, where
// the library answers without a GPU, walks buffers of it through the release's own
// cuptiActivityGetNextRecord. API 19, 23, 25 and 27 name releases that were not checked, so they
// are refused.
struct CheckedRelease {
  uint32_t api_lo, api_hi;
  const char* release;
  RecordLayout layout;
};
constexpr CheckedRelease kCheckedReleases[] = {
    {18, 18, "12.1", RecordLayout::kCupti12Memcpy5},
    {20, 20, "12.2", RecordLayout::kCupti12Memcpy5},
    {21, 21, "12.3", RecordLayout::kCupti12Memcpy5},
    {22, 22, "12.4", RecordLayout::kCupti12Memcpy5},
    {24, 24, "12.6", RecordLayout::kCupti12Memcpy5},
    {26, 26, "12.8", RecordLayout::kCupti12Memcpy6},
    {28, 28, "12.9", RecordLayout::kCupti12Memcpy6},
    // Since 13.0 the version reads xxyyzz (cupti_version.h): one minor release is a range. The
    // kernel record grew in 13.1 (Kernel11), 13.3 (Kernel12) and 13.4 (Kernel13, with Memcpy7
    // and Memset5); every field the decoder reads kept its offset.
    {130000, 130099, "13.0", RecordLayout::kCupti13_0},
    {130100, 130299, "13.1-13.2", RecordLayout::kCupti13_1},
    {130300, 130399, "13.3", RecordLayout::kCupti13_3},
    {130400, 130599, "13.4-13.5", RecordLayout::kCupti13_4},
};

}  // namespace

RecordLayout layout_for_version(uint32_t api_version, std::string* why) {
  for (const CheckedRelease& r : kCheckedReleases)
    if (api_version >= r.api_lo && api_version <= r.api_hi) return r.layout;
  if (why)
    *why = "libcupti API version " + std::to_string(api_version) +
           " has a record layout this build does not know (supported: CUPTI 12.1, 12.2, 12.3, "
           "12.4, 12.6, 12.8, 12.9 = API 18, 20-22, 24, 26, 28, and 13.0-13.5 = API 130000-130599)";
  return RecordLayout::kUnknown;
}

const char* layout_name(RecordLayout layout) {
  switch (layout) {
    case RecordLayout::kCupti12Memcpy5: return "cupti-12 (Kernel9, Memcpy5, MemcpyPtoP4, Memset4)";
    case RecordLayout::kCupti12Memcpy6: return "cupti-12.8 (Kernel9, Memcpy6, MemcpyPtoP4, Memset4)";
    case RecordLayout::kCupti13_0: return "cupti-13.0 (Kernel10, Memcpy6, MemcpyPtoP4, Memset4)";
    case RecordLayout::kCupti13_1: return "cupti-13.1 (Kernel11, Memcpy6, MemcpyPtoP4, Memset4)";
    case RecordLayout::kCupti13_3: return "cupti-13.3 (Kernel12, Memcpy6, MemcpyPtoP4, Memset4)";
    case RecordLayout::kCupti13_4: return "cupti-13.4 (Kernel13, Memcpy7, MemcpyPtoP4, Memset5)";
    case RecordLayout::kUnknown: break;
  }
  return "unknown";
}

LayoutSizes layout_sizes(RecordLayout layout) {
  switch (layout) {
    case RecordLayout::kCupti12Memcpy5:
      return {sizeof(CUpti_ActivityKernel9), sizeof(CUpti_ActivityMemcpy5),
              sizeof(CUpti_ActivityMemcpyPtoP4), sizeof(CUpti_ActivityMemset4)};
    case RecordLayout::kCupti12Memcpy6:
      return {sizeof(CUpti_ActivityKernel9), sizeof(CUpti_ActivityMemcpy6),
              sizeof(CUpti_ActivityMemcpyPtoP4), sizeof(CUpti_ActivityMemset4)};
    case RecordLayout::kCupti13_0:
      return {sizeof(CUpti_ActivityKernel10), sizeof(CUpti_ActivityMemcpy6),
              sizeof(CUpti_ActivityMemcpyPtoP4), sizeof(CUpti_ActivityMemset4)};
    // Read off each release's cupti_activity.h (not in the toolkit's headers).
    case RecordLayout::kCupti13_1:
      return {224, sizeof(CUpti_ActivityMemcpy6), sizeof(CUpti_ActivityMemcpyPtoP4),
              sizeof(CUpti_ActivityMemset4)};
    case RecordLayout::kCupti13_3:
      return {232, sizeof(CUpti_ActivityMemcpy6), sizeof(CUpti_ActivityMemcpyPtoP4),
              sizeof(CUpti_ActivityMemset4)};
    case RecordLayout::kCupti13_4:
      return {248, 112, sizeof(CUpti_ActivityMemcpyPtoP4), 104};
    case RecordLayout::kUnknown: break;
  }
  return {0, 0, 0, 0};
}

namespace {

// A libcupti some other component already mapped, found by soname or by any loaded path that
// names libcupti (wheels install it as .../nvidia/cuda_cupti/lib/libcupti.so.13).
void* already_loaded(std::string* path) {
  for (const char* soname : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) {
    if (void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD)) {
      *path = soname;
      return h;
    }
  }
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        if (info->dlpi_name && std::string(info->dlpi_name).find("libcupti") != std::string::npos) {
          *static_cast<std::string*>(data) = info->dlpi_name;
          return 1;
        }
        return 0;
      },
      &found);
  if (found.empty()) return nullptr;
  void* h = dlopen(found.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h) *path = found;
  return h;
}

// Steps 2-4 of CuptiLibrary::load's order.
std::vector<std::string> candidate_paths(const std::string& explicit_path) {
  std::vector<std::string> paths;
  if (!explicit_path.empty()) paths.push_back(explicit_path);
  paths.push_back("libcupti.so.13");  // the loader's search path
  paths.push_back("libcupti.so.12");
  std::vector<std::string> roots;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) roots.push_back(home);
  roots.push_back("/usr/local/cuda");
  roots.push_back(TRAINTIME_CUDA_ROOT);
  for (const std::string& root : roots) {
    for (const char* dir : {"/lib64/", "/extras/CUPTI/lib64/"}) {
      for (const char* soname : {"libcupti.so.13", "libcupti.so.12"}) {
        const std::string path = root + dir + soname;
        if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
      }
    }
  }
  return paths;
}

// The file behind a handle (a soname candidate resolves to whatever the loader found).
std::string file_of(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
    return map->l_name;
  return fallback;
}

}  // namespace

bool CuptiLibrary::load(const std::string& explicit_path, std::string* reason) {
  std::string loaded_path;
  if (void* handle = already_loaded(&loaded_path)) {
    reused_ = true;
    path_ = file_of(handle, loaded_path);
    if (!explicit_path.empty() && path_ != explicit_path)
      support::log_warn("TRAINTIME_CUPTI_LIB={} is not used: the process already has {} loaded "
                        "(two CUPTIs cannot share one process)",
                        explicit_path, path_);
    return use(handle, reason);
  }
  reused_ = false;
  std::string refused;  // "candidate: why" for every candidate that was found but not usable
  std::string explicit_why;  // why TRAINTIME_CUPTI_LIB, found, was not used
  for (const std::string& candidate : candidate_paths(explicit_path)) {
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      if (candidate == explicit_path)
        support::log_warn("TRAINTIME_CUPTI_LIB={} cannot be loaded ({}); looking further",
                          explicit_path, err ? err : "unknown error");
      continue;
    }
    path_ = file_of(handle, candidate);
    std::string why;
    if (use(handle, &why)) {
      if (!explicit_why.empty()) {
        explicit_note_ = "TRAINTIME_CUPTI_LIB=" + explicit_path + " not used (" + explicit_why + ")";
        support::log_warn("TRAINTIME_CUPTI_LIB={} cannot be used ({}); using CUPTI {} from {} instead. "
                          "Point TRAINTIME_CUPTI_LIB at a supported libcupti or unset it",
                          explicit_path, explicit_why, version_, path_);
      }
      return true;
    }
    refused += (refused.empty() ? "" : "; ") + why;
    api_ = CuptiApi{};
    version_ = 0;
    dlclose(handle);
    if (candidate == explicit_path) {
      explicit_why = why;
      // Unloaded, unless something keeps it (then it stays mapped, unused, and the warning says so).
      if (void* still = dlopen(candidate.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        dlclose(still);
        explicit_why += "; it stays mapped in the process but traintime makes no call into it";
      }
    }
  }
  *reason = refused.empty()
                ? "libcupti not found (looked in TRAINTIME_CUPTI_LIB, the loader's search path, "
                  "$CUDA_HOME and /usr/local/cuda; set TRAINTIME_CUPTI_LIB)"
                : "no usable libcupti: " + refused;
  return false;
}

std::string CuptiLibrary::describe() const {
  return "CUPTI " + std::to_string(version_) + " (" + path_ + ")";
}

bool CuptiLibrary::use(void* handle, std::string* reason) {
  if (!resolve(handle, reason)) return false;
  // Not through checked(): a library that cannot say its version is simply unusable.
  if (api_.cuptiGetVersion(&version_) != CUPTI_SUCCESS) {
    version_ = 0;
    *reason = path_ + ": cuptiGetVersion failed";
    return false;
  }
  layout_ = layout_for_version(version_, reason);
  if (layout_ == RecordLayout::kUnknown) {
    *reason = path_ + " (CUPTI " + std::to_string(version_) + "): " + *reason;
    return false;
  }
  return true;
}

bool CuptiLibrary::resolve(void* handle, std::string* reason) {
#define TRAINTIME_CUPTI_RESOLVE(name)                                            \
  api_.name = reinterpret_cast<decltype(api_.name)>(dlsym(handle, #name));       \
  if (!api_.name) {                                                              \
    *reason = path_ + " lacks " #name;                                           \
    return false;                                                                \
  }
  TRAINTIME_CUPTI_FUNCTIONS(TRAINTIME_CUPTI_RESOLVE)
#undef TRAINTIME_CUPTI_RESOLVE
#define TRAINTIME_CUPTI_RESOLVE_OPTIONAL(name) \
  api_.name = reinterpret_cast<decltype(api_.name)>(dlsym(handle, #name));
  TRAINTIME_CUPTI_OPTIONAL_FUNCTIONS(TRAINTIME_CUPTI_RESOLVE_OPTIONAL)
#undef TRAINTIME_CUPTI_RESOLVE_OPTIONAL
  return true;
}

const char* CuptiLibrary::result_string(CUptiResult rc) const {
  const char* text = nullptr;
  if (api_.cuptiGetResultString && api_.cuptiGetResultString(rc, &text) == CUPTI_SUCCESS && text)
    return text;
  return "unknown CUPTI result";
}

CUptiResult checked(const CuptiLibrary& lib, CallSite& site, CUptiResult rc, CUptiResult expected) {
  if (rc == CUPTI_SUCCESS || rc == expected) return rc;
  if (!site.logged.exchange(true, std::memory_order_relaxed))
    support::log_warn("{} failed: {} ({}) at {}:{}; further failures here are not logged",
                      site.function, lib.result_string(rc), static_cast<int>(rc), site.file,
                      site.line);
  return rc;
}

}  // namespace traintime::cupti
