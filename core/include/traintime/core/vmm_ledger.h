// Device memory made through CUDA's virtual memory management API (VMM: cuMemCreate and
// cuMemMap), as PyTorch's expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)
// and NCCL's buffers (NCCL_CUMEM_ENABLE, automatic in current NCCL releases) allocate it. CUPTI's
// memory records are documented for cudaMalloc-style allocations and pools; nothing documents
// them for VMM, so traintime follows the VMM calls themselves (driver API callbacks) and keeps the
// physical memory's life here, in the driver's terms:
//   - cuMemCreate makes `size` bytes of physical memory on a device, one reference to it held by
//     the handle it returns; cuMemRetainAllocationHandle takes one more reference (same handle);
//   - cuMemMap maps (part of) it into an address range, cuMemUnmap unmaps whole mappings;
//   - cuMemRelease drops a reference; the memory is freed once no reference and no mapping is
//     left (a common idiom releases the handle right after mapping: freed at the unmap).
// The allocation counts from its cuMemCreate to that moment. Handles this ledger did not see made
// (imported from another process, made before capture) and host-located ones are not counted.
// Each change becomes a core::MemoryEvent keyed by the handle (MemoryEvent::handle) for the
// MemoryTracker. Not thread-safe: the caller serialises (the CUPTI adapter under a mutex, in call
// order).
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "traintime/core/memory_tracker.h"

namespace traintime::core {

class VmmLedger {
 public:
  // When and in which step the call returned, for the events it makes.
  struct At {
    uint64_t timestamp_ns = 0;
    uint64_t step = 0;
  };

  // cuMemCreate returned `handle` for `bytes` on CUDA device `device`: an allocation event.
  void created(uint64_t handle, uint64_t bytes, uint32_t device, At at, std::vector<MemoryEvent>* out);
  // cuMemRetainAllocationHandle returned `handle`.
  void retained(uint64_t handle);
  // cuMemRelease(handle): a release event when nothing maps it any more.
  void released(uint64_t handle, At at, std::vector<MemoryEvent>* out);
  // cuMemMap(address, bytes, ..., handle). A mapping this ledger still holds at `address` was
  // unmapped by a call it missed: it goes, and a release event is made when its allocation is
  // left with no reference and no mapping (a repeated call, the same handle at the same
  // address, changes nothing).
  void mapped(uint64_t address, uint64_t bytes, uint64_t handle, At at, std::vector<MemoryEvent>* out);
  // cuMemUnmap(address, bytes): every mapping starting in [address, address + bytes) goes; a
  // release event for each allocation left with no reference and no mapping.
  void unmapped(uint64_t address, uint64_t bytes, At at, std::vector<MemoryEvent>* out);

  uint64_t allocations() const { return allocations_; }  // cuMemCreate calls counted
  uint64_t live() const { return handles_.size(); }      // allocations not yet freed
  // Calls naming a handle this ledger does not know (imported, or made before capture).
  uint64_t foreign_calls() const { return foreign_; }

 private:
  struct Handle {
    uint64_t bytes = 0;
    uint32_t device = 0;
    uint32_t references = 0;
    uint32_t mappings = 0;
  };
  void free_if_unused(uint64_t handle, At at, std::vector<MemoryEvent>* out);

  std::unordered_map<uint64_t, Handle> handles_;
  struct Mapping {
    uint64_t bytes = 0;
    uint64_t handle = 0;
  };
  std::map<uint64_t, Mapping> mappings_;  // by address: only mappings of known handles
  uint64_t allocations_ = 0, foreign_ = 0;
};

}  // namespace traintime::core
