#include "traintime/core/vmm_ledger.h"

namespace traintime::core {
namespace {

MemoryEvent event(uint64_t handle, uint64_t bytes, uint32_t device, VmmLedger::At at, bool release) {
  MemoryEvent e;
  e.timestamp_ns = at.timestamp_ns;
  e.address = handle;
  e.bytes = bytes;
  e.step = at.step;
  e.device = device;
  e.release = release;
  e.handle = true;
  return e;
}

}  // namespace

void VmmLedger::created(uint64_t handle, uint64_t bytes, uint32_t device, At at,
                        std::vector<MemoryEvent>* out) {
  auto [it, inserted] = handles_.try_emplace(handle);
  if (!inserted) {
    // The driver reuses a handle value only once it is gone: a release this ledger missed.
    // The old allocation is freed first (the tracker then sees the new one as new).
    out->push_back(event(handle, 0, it->second.device, at, true));
    for (auto m = mappings_.begin(); m != mappings_.end();)
      m = m->second.handle == handle ? mappings_.erase(m) : std::next(m);
  }
  it->second = Handle{bytes, device, 1, 0};
  ++allocations_;
  out->push_back(event(handle, bytes, device, at, false));
}

void VmmLedger::retained(uint64_t handle) {
  const auto it = handles_.find(handle);
  if (it == handles_.end()) {
    ++foreign_;
    return;
  }
  ++it->second.references;
}

void VmmLedger::released(uint64_t handle, At at, std::vector<MemoryEvent>* out) {
  const auto it = handles_.find(handle);
  if (it == handles_.end() || it->second.references == 0) {
    ++foreign_;
    return;
  }
  --it->second.references;
  free_if_unused(handle, at, out);
}

void VmmLedger::mapped(uint64_t address, uint64_t bytes, uint64_t handle, At at,
                       std::vector<MemoryEvent>* out) {
  const auto it = handles_.find(handle);
  if (it == handles_.end()) {
    ++foreign_;
    return;
  }
  // The new mapping counts first, so that the same call seen twice never frees its own memory.
  ++it->second.mappings;
  const auto [m, inserted] = mappings_.try_emplace(address, Mapping{bytes, handle});
  if (inserted) return;
  // A mapping at an address still held by one this ledger thought alive: its unmap was missed,
  // so that one is gone, and with it the memory it alone kept (its handle released before).
  const uint64_t old = m->second.handle;
  m->second = Mapping{bytes, handle};
  if (const auto h = handles_.find(old); h != handles_.end() && h->second.mappings > 0)
    --h->second.mappings;
  free_if_unused(old, at, out);
}

void VmmLedger::unmapped(uint64_t address, uint64_t bytes, At at, std::vector<MemoryEvent>* out) {
  auto m = mappings_.lower_bound(address);
  if (m == mappings_.end() || m->first - address >= bytes) {
    ++foreign_;  // a range of an imported or unseen handle
    return;
  }
  while (m != mappings_.end() && m->first - address < bytes) {
    const uint64_t handle = m->second.handle;
    m = mappings_.erase(m);
    const auto h = handles_.find(handle);
    if (h == handles_.end()) continue;
    if (h->second.mappings > 0) --h->second.mappings;
    free_if_unused(handle, at, out);
  }
}

void VmmLedger::free_if_unused(uint64_t handle, At at, std::vector<MemoryEvent>* out) {
  const auto it = handles_.find(handle);
  if (it == handles_.end() || it->second.references > 0 || it->second.mappings > 0) return;
  out->push_back(event(handle, it->second.bytes, it->second.device, at, true));
  handles_.erase(it);
}

}  // namespace traintime::core
