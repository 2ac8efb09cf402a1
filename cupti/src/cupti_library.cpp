#include "cupti_library.h"

#include <dlfcn.h>
#include <link.h>

#include <string>
#include <vector>

#include "traintime/support/log.h"

#ifndef TRAINTIME_CUDA_ROOT
#define TRAINTIME_CUDA_ROOT "/usr/local/cuda"
#endif

namespace traintime::cupti {

RecordLayout layout_for_version(uint32_t api_version, std::string* why) {
  // Since 13.0 the version reads xxyyzz (cupti_version.h). The structs of 13.0 and 13.0 Update 1
  // (130000, 130001) are the ones this build was compiled and checked against; 13.1 already
  // changed the kernel record (Kernel11), so every other version is refused rather than guessed.
  if (api_version >= 130000 && api_version < 130100) return RecordLayout::kCupti13_0;
  if (why)
    *why = "libcupti API version " + std::to_string(api_version) +
           " has a record layout this build does not know (supported: CUPTI 13.0.x, "
           "API 130000-130099)";
  return RecordLayout::kUnknown;
}

const char* layout_name(RecordLayout layout) {
  switch (layout) {
    case RecordLayout::kCupti13_0: return "cupti-13.0 (Kernel10, Memcpy6, MemcpyPtoP4, Memset4)";
    case RecordLayout::kUnknown: break;
  }
  return "unknown";
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

std::vector<std::string> candidate_paths(const std::string& explicit_path) {
  std::vector<std::string> paths;
  if (!explicit_path.empty()) paths.push_back(explicit_path);
  for (const char* root : {TRAINTIME_CUDA_ROOT, "/usr/local/cuda"}) {
    paths.push_back(std::string(root) + "/lib64/libcupti.so.13");
    paths.push_back(std::string(root) + "/extras/CUPTI/lib64/libcupti.so.13");
  }
  paths.push_back("libcupti.so.13");  // LD_LIBRARY_PATH, ld.so.cache
  return paths;
}

}  // namespace

bool CuptiLibrary::load(const std::string& explicit_path, std::string* reason) {
  std::string path;
  void* handle = already_loaded(&path);
  reused_ = handle != nullptr;
  std::string tried;
  if (!handle) {
    for (const std::string& candidate : candidate_paths(explicit_path)) {
      handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        path = candidate;
        break;
      }
      const char* err = dlerror();
      if (candidate == explicit_path && err)
        support::log_warn("TRAINTIME_CUPTI_LIB={} cannot be loaded: {}", explicit_path, err);
      tried += (tried.empty() ? "" : ", ") + candidate;
    }
  }
  if (!handle) {
    *reason = "libcupti not found (tried " + tried + "; set TRAINTIME_CUPTI_LIB)";
    return false;
  }
  path_ = path;
  if (!resolve(handle, reason)) return false;
  // Not through checked(): a library that cannot say its version is simply unusable.
  if (api_.cuptiGetVersion(&version_) != CUPTI_SUCCESS) {
    *reason = path_ + ": cuptiGetVersion failed";
    return false;
  }
  layout_ = layout_for_version(version_, reason);
  if (layout_ == RecordLayout::kUnknown) {
    *reason = path_ + ": " + *reason;
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
