#include "traintime/support/loader.h"

#include <link.h>

#include <cerrno>
#include <cstddef>

namespace traintime::support {

namespace {

// The loader's counters, the same in every entry of dl_iterate_phdr: read from the first.
struct Counters {
  unsigned long long adds = 0;
  unsigned long long subs = 0;
};

Counters loader_counters() noexcept {
  const int saved = errno;
  Counters c;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* out) -> int {
        auto& c = *static_cast<Counters*>(out);
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          c.adds = info->dlpi_adds;
          c.subs = info->dlpi_subs;
        }
        return 1;  // stop at the first
      },
      &c);
  errno = saved;
  return c;
}

}  // namespace

unsigned long long loaded_object_adds() noexcept { return loader_counters().adds; }

unsigned long long loaded_object_subs() noexcept { return loader_counters().subs; }

bool in_read_only_segment(const void* p) noexcept {
  const int saved = errno;
  const auto at = reinterpret_cast<ElfW(Addr)>(p);
  struct Query {
    ElfW(Addr) at;
    bool read_only = false;
  } q{at};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) -> int {
        Query& q = *static_cast<Query*>(out);
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          const ElfW(Addr) begin = info->dlpi_addr + ph.p_vaddr;
          if (q.at < begin || q.at - begin >= ph.p_memsz) continue;
          // The file's bytes only: past p_filesz a segment is zero-filled memory (.bss).
          q.read_only = (ph.p_flags & PF_W) == 0 && q.at - begin < ph.p_filesz;
          return 1;
        }
        return 0;
      },
      &q);
  errno = saved;
  return q.read_only;
}

}  // namespace traintime::support
