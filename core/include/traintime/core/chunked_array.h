// A growable array whose elements never move, so other threads may read published elements
// without a lock while the owner keeps appending (region paths, per-thread stats).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>

namespace traintime::core {

template <typename T, std::size_t kChunkBits, std::size_t kMaxChunks>
class ChunkedArray {
 public:
  static constexpr std::size_t kChunkSize = std::size_t{1} << kChunkBits;
  static constexpr std::size_t kCapacity = kChunkSize * kMaxChunks;

  ChunkedArray() {
    for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
  }
  ~ChunkedArray() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
  }
  ChunkedArray(const ChunkedArray&) = delete;
  ChunkedArray& operator=(const ChunkedArray&) = delete;

  // Makes index i addressable. Single writer (callers serialise); allocates at most one chunk.
  // Returns false when i is beyond the fixed capacity.
  bool ensure(std::size_t i) {
    if (i >= kCapacity) return false;
    auto& slot = chunks_[i >> kChunkBits];
    if (!slot.load(std::memory_order_relaxed)) slot.store(new T[kChunkSize](), std::memory_order_release);
    return true;
  }

  // Element i, or nullptr when its chunk was never allocated. Lock-free.
  T* find(std::size_t i) const {
    if (i >= kCapacity) return nullptr;
    T* chunk = chunks_[i >> kChunkBits].load(std::memory_order_acquire);
    return chunk ? &chunk[i & (kChunkSize - 1)] : nullptr;
  }

  // Element i whose chunk is known to exist (ensure() succeeded before, on this thread or
  // before the index was published to it).
  T& operator[](std::size_t i) const {
    return chunks_[i >> kChunkBits].load(std::memory_order_relaxed)[i & (kChunkSize - 1)];
  }

  // The memory its chunks hold (self_cost.memory): each allocated chunk, whole.
  std::size_t allocated_bytes() const {
    std::size_t n = 0;
    for (const auto& c : chunks_)
      if (c.load(std::memory_order_relaxed) != nullptr) n += kChunkSize * sizeof(T);
    return n + sizeof(chunks_);
  }

 private:
  std::array<std::atomic<T*>, kMaxChunks> chunks_;
};

}  // namespace traintime::core
