#include "traintime/support/loader.h"

#include <link.h>

#include <cerrno>
#include <cstddef>

namespace traintime::support {

unsigned long long loaded_object_adds() noexcept {
  const int saved = errno;
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* out) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
          *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;  // the counter is the same in every entry: stop at the first
      },
      &adds);
  errno = saved;
  return adds;
}

unsigned long long loaded_object_subs() noexcept {
  const int saved = errno;
  unsigned long long subs = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* out) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
          *static_cast<unsigned long long*>(out) = info->dlpi_subs;
        return 1;  // the same in every entry
      },
      &subs);
  errno = saved;
  return subs;
}

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
