// support::RealSymbol: the slow path runs once per calling object (and again only after the
// process loaded a new object while nothing defined the symbol).
#include "traintime/support/real_symbol.h"

#include <dlfcn.h>
#include <link.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "traintime/support/loader.h"

namespace traintime::support {
namespace {

constexpr size_t kPathMax = 4096;

// One loaded object: its mapped range and the path the loader knows it by.
struct ObjectInfo {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  bool main_program = false;  // dl_iterate_phdr reports the main program first
  char path[kPathMax] = {};
};

bool contains(const ObjectInfo& o, const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return a >= o.lo && a < o.hi;
}

// The object whose PT_LOAD segments hold `address`. Under the loader's lock: slow path only.
bool object_holding(const void* address, ObjectInfo* out) noexcept {
  struct Search {
    uintptr_t address;
    ObjectInfo* out;
    bool first;
    bool found;
  } search{reinterpret_cast<uintptr_t>(address), out, true, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) -> int {
        auto* s = static_cast<Search*>(arg);
        const bool first = s->first;
        s->first = false;
        uintptr_t lo = UINTPTR_MAX;
        uintptr_t hi = 0;
        bool inside = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          const uintptr_t a = info->dlpi_addr + ph.p_vaddr;
          const uintptr_t b = a + ph.p_memsz;
          lo = a < lo ? a : lo;
          hi = b > hi ? b : hi;
          inside = inside || (s->address >= a && s->address < b);
        }
        if (!inside) return 0;
        s->out->lo = lo;
        s->out->hi = hi;
        s->out->main_program = first;
        const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        std::strncpy(s->out->path, name, kPathMax - 1);
        s->found = true;
        return 1;
      },
      &search);
  return search.found;
}

// A handle on an object already loaded (a reference taken; nullptr if it cannot be named).
void* open_loaded(const ObjectInfo& o) noexcept {
  if (o.main_program) return dlopen(nullptr, RTLD_LAZY);
  if (o.path[0] == '\0') return nullptr;  // e.g. the vDSO
  return dlopen(o.path, RTLD_LAZY | RTLD_NOLOAD);
}

// The definition of `name` or `pname` that `object` itself holds (not one of its dependencies').
void* defined_in(void* handle, const ObjectInfo& object, const char* name,
                 const char* pname) noexcept {
  for (const char* n : {name, pname}) {
    if (n == nullptr) continue;
    void* fn = dlsym(handle, n);
    if (fn != nullptr && contains(object, fn)) return fn;
  }
  return nullptr;
}

// A shared library whose file name starts with `prefix`: "libnccl" matches libnccl.so.2 but not
// NCCL's plugins (libnccl-net*, libnccl-profiler*, libnccl-tuner*), which do not define the API.
bool is_preferred_file(const char* path, const char* prefix) noexcept {
  if (path == nullptr || path[0] == '\0' || prefix == nullptr) return false;
  const char* base = std::strrchr(path, '/');
  base = base != nullptr ? base + 1 : path;
  const size_t n = std::strlen(prefix);
  return std::strncmp(base, prefix, n) == 0 && std::strstr(base, ".so") != nullptr &&
         base[n] != '-';
}

// The mapped range of one loaded object.
template <typename Info>
void range_of(const Info* info, uintptr_t* lo, uintptr_t* hi) {
  *lo = UINTPTR_MAX;
  *hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t a = info->dlpi_addr + ph.p_vaddr;
    *lo = a < *lo ? a : *lo;
    *hi = a + ph.p_memsz > *hi ? a + ph.p_memsz : *hi;
  }
}

// Step 5's listing of loaded objects (collected under the loader's lock, opened after it).
struct Listing {
  uintptr_t own_lo;     // this library's first address: never a candidate
  const char* prefix;   // preferred file names (see is_preferred_file)
  bool preferred;       // preferred files only, or every object but those
  size_t objects;    // pass 1: how many objects qualify
  size_t bytes;      // pass 1: bytes of their paths
};

bool qualifies(const Listing& l, const dl_phdr_info* info) {
  const char* path = info->dlpi_name;
  if (path == nullptr || path[0] == '\0') return false;  // the main program: steps 1 to 3
  if (is_preferred_file(path, l.prefix) != l.preferred) return false;
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  range_of(info, &lo, &hi);
  return lo != l.own_lo;
}

struct Candidate {
  uintptr_t lo;
  uintptr_t hi;
  size_t path_at;  // offset of its path in the arena
};

struct Fill {
  const Listing* listing;
  Candidate* candidates;
  size_t capacity;
  char* arena;
  size_t arena_size;
  size_t n;
  size_t used;
};

// Step 5: a loaded object (preferred files when `preferred`, else every other one) other than
// this library that itself defines the symbol. The objects are listed under the loader's
// lock (ranges and paths copied into one allocation sized by a first pass) and opened after it
// is released: dlopen inside dl_iterate_phdr could deadlock against a thread loading a library.
void* search_loaded(const char* name, const char* pname, uintptr_t own_lo, const char* prefix,
                    bool preferred, char* path_out = nullptr, size_t path_size = 0) noexcept {
  Listing l{own_lo, prefix, preferred, 0, 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) -> int {
        auto* l = static_cast<Listing*>(arg);
        if (qualifies(*l, info)) {
          ++l->objects;
          l->bytes += std::strlen(info->dlpi_name) + 1;
        }
        return 0;
      },
      &l);
  if (l.objects == 0) return nullptr;
  // Room for objects loaded between the passes; any beyond it are seen at the next search.
  Fill fill{&l, nullptr, l.objects + 16, nullptr, l.bytes + 16 * 256, 0, 0};
  fill.candidates = new (std::nothrow) Candidate[fill.capacity];
  fill.arena = new (std::nothrow) char[fill.arena_size];
  void* found = nullptr;
  if (fill.candidates != nullptr && fill.arena != nullptr) {
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* arg) -> int {
          auto* f = static_cast<Fill*>(arg);
          if (!qualifies(*f->listing, info)) return 0;
          const size_t len = std::strlen(info->dlpi_name) + 1;
          if (f->n == f->capacity || f->used + len > f->arena_size) return 1;
          Candidate& c = f->candidates[f->n++];
          range_of(info, &c.lo, &c.hi);
          c.path_at = f->used;
          std::memcpy(f->arena + f->used, info->dlpi_name, len);
          f->used += len;
          return 0;
        },
        &fill);
    for (size_t i = 0; i < fill.n && found == nullptr; ++i) {
      ObjectInfo o;
      o.lo = fill.candidates[i].lo;
      o.hi = fill.candidates[i].hi;
      std::strncpy(o.path, fill.arena + fill.candidates[i].path_at, kPathMax - 1);
      void* handle = open_loaded(o);
      if (handle == nullptr) continue;
      found = defined_in(handle, o, name, pname);
      if (found == nullptr) {
        dlclose(handle);
      } else if (path_out != nullptr && path_size > 0) {
        std::strncpy(path_out, o.path, path_size - 1);
        path_out[path_size - 1] = '\0';
      }
    }
  }
  delete[] fill.candidates;
  delete[] fill.arena;
  return found;
}

}  // namespace

void* RealSymbol::resolve(const void* self, const void* caller) noexcept {
  const int saved_errno = errno;
  void* fn = nullptr;
  const unsigned long long adds = support::loaded_object_adds();
  if (missing_at_adds_.load(std::memory_order_relaxed) != adds) {
    std::lock_guard<std::mutex> lock(mutex_);
    ObjectInfo own;
    if (!object_holding(self, &own)) own = ObjectInfo{};
    const auto acceptable = [&](void* f) { return f != nullptr && f != self && !contains(own, f); };

    ObjectInfo from;
    const bool known_caller = caller != nullptr && object_holding(caller, &from);
    void* caller_handle = known_caller ? open_loaded(from) : nullptr;
    bool keep_caller_handle = false;
    if (caller_handle != nullptr) {  // 1. the caller's own NCCL
      fn = defined_in(caller_handle, from, name_, pname_);
      if (!acceptable(fn)) fn = nullptr;
      keep_caller_handle = fn != nullptr;
    }
    if (fn == nullptr) {  // 2. the next definition in the global scope
      fn = dlsym(RTLD_NEXT, name_);
      if (!acceptable(fn)) fn = nullptr;
    }
    if (fn == nullptr && caller_handle != nullptr && !from.main_program) {
      fn = dlsym(caller_handle, name_);  // 3. the caller's own lookup scope
      if (!acceptable(fn)) fn = nullptr;
      keep_caller_handle = fn != nullptr;
    }
    if (fn == nullptr && pname_ != nullptr) {  // 4. the alias (NCCL's PROFAPI pncclX)
      fn = dlsym(RTLD_DEFAULT, pname_);
      if (!acceptable(fn)) fn = nullptr;
    }
    if (fn == nullptr) fn = search_loaded(name_, pname_, own.lo, prefix_, true);  // 5.
    if (fn == nullptr) fn = search_loaded(name_, pname_, own.lo, prefix_, false);
    if (caller_handle != nullptr && !keep_caller_handle) dlclose(caller_handle);

    if (fn == nullptr) {
      missing_at_adds_.store(adds, std::memory_order_relaxed);
    } else if (!known_caller) {
      any_.store(fn, std::memory_order_release);
    } else {
      const unsigned n = used_.load(std::memory_order_relaxed);
      if (n < kCallerSlots) {
        slots_[n] = Slot{from.lo, from.hi, fn};
        used_.store(n + 1, std::memory_order_release);
      }
    }
  }
  dlerror();  // a failed dlsym leaves a message the app's next dlerror() would otherwise read
  errno = saved_errno;
  return fn;
}

bool object_defining(const char* name, const char* skip_prefix, const void* self, char* path,
                     size_t path_size) noexcept {
  const int saved_errno = errno;
  ObjectInfo own;
  if (self == nullptr || !object_holding(self, &own)) own = ObjectInfo{};
  const bool found = search_loaded(name, nullptr, own.lo, skip_prefix, false, path, path_size) != nullptr;
  dlerror();
  errno = saved_errno;
  return found;
}

}  // namespace traintime::support
