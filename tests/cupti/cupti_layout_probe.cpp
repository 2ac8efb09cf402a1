// Compiled once per CUPTI release against that release's own cupti_activity.h (tests/cupti:
// CMake, from scripts/fetch-cupti-releases.py's releases.txt): prints the size of the record
// structs the release writes (its newest kernel, memcpy, peer-to-peer and memset structs, named by
// TT_KERNEL, TT_MEMCPY, TT_PTOP and TT_MEMSET; its memory struct TT_MEMORY) and the offset of every field traintime's decoder
// reads, one "name value" a line, for cupti_release_test.cpp to compare with traintime's table.
#include <cupti_activity.h>

#include <cstddef>
#include <cstdio>

#define TT_FIELD(family, S, field) std::printf(family "." #field " %zu\n", offsetof(S, field))
#define TT_COMMON(family, S)                                \
  std::printf(family ".size %zu\n", sizeof(S));            \
  TT_FIELD(family, S, kind);                                \
  TT_FIELD(family, S, start);                               \
  TT_FIELD(family, S, end);                                 \
  TT_FIELD(family, S, deviceId);                            \
  TT_FIELD(family, S, streamId);                            \
  TT_FIELD(family, S, correlationId);                       \
  TT_FIELD(family, S, graphId);                             \
  TT_FIELD(family, S, graphNodeId)

int main() {
  TT_COMMON("kernel", TT_KERNEL);
  TT_FIELD("kernel", TT_KERNEL, name);
  TT_FIELD("kernel", TT_KERNEL, gridX);
  TT_FIELD("kernel", TT_KERNEL, gridY);
  TT_FIELD("kernel", TT_KERNEL, gridZ);
  TT_COMMON("memcpy", TT_MEMCPY);
  TT_FIELD("memcpy", TT_MEMCPY, copyKind);
  TT_FIELD("memcpy", TT_MEMCPY, bytes);
  TT_FIELD("memcpy", TT_MEMCPY, runtimeCorrelationId);
#ifdef TT_MEMCPY_COUNT
  TT_FIELD("memcpy", TT_MEMCPY, copyCount);
#endif
  TT_COMMON("ptop", TT_PTOP);
  TT_FIELD("ptop", TT_PTOP, bytes);
  TT_COMMON("memset", TT_MEMSET);
  TT_FIELD("memset", TT_MEMSET, bytes);
  // MEMORY2 (allocations and releases): the walker is the library's, so only the fields read.
  TT_FIELD("memory", TT_MEMORY, kind);
  TT_FIELD("memory", TT_MEMORY, memoryOperationType);
  TT_FIELD("memory", TT_MEMORY, memoryKind);
  TT_FIELD("memory", TT_MEMORY, correlationId);
  TT_FIELD("memory", TT_MEMORY, address);
  TT_FIELD("memory", TT_MEMORY, bytes);
  TT_FIELD("memory", TT_MEMORY, timestamp);
  TT_FIELD("memory", TT_MEMORY, deviceId);
  return 0;
}
