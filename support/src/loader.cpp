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

}  // namespace traintime::support
