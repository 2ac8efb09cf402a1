// Activity buffers handed to CUPTI (buffer_count x buffer_mb at most, TRAINTIME_BUFFER_COUNT /
// TRAINTIME_BUFFER_MB). CUPTI asks on application threads (13.0 keeps per-thread buffers), so
// a request takes a short mutex and allocates only while the pool is still below its limit;
// when every buffer is out it answers "no buffer" and CUPTI drops and counts the records.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace traintime::cupti {

class BufferPool {
 public:
  BufferPool(size_t buffer_bytes, uint32_t max_buffers);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // nullptr when all max_buffers are in use (or memory is short): CUPTI then drops records.
  // `step` is the number of steps completed when CUPTI asked for it (live metrics: records of a
  // step may be in any buffer handed out before the step ended).
  uint8_t* acquire(uint32_t step = 0) noexcept;
  void release(uint8_t* buffer) noexcept;
  // The smallest `step` of the pool buffers handed out and not yet released (CUPTI holds them,
  // or they wait to be ingested); UINT32_MAX when none is out.
  uint32_t min_outstanding_step() const;
  // Buffers handed out so far, and the smallest such count at the hand-out of a pool buffer not
  // yet released (UINT64_MAX when none is out): records written before handed_out() read H are
  // in buffers that min_outstanding_handout() >= H says are all back (detected steps' live
  // metrics, which have no step count to tag buffers with).
  uint64_t handed_out() const;
  uint64_t min_outstanding_handout() const;

  // For CUPTI releases that must never be refused a buffer (API < 27 can crash then): a small
  // scratch buffer whose records the caller counts as dropped instead of ingesting them.
  // Allocated on demand and kept for reuse; nullptr only when memory itself is short.
  static constexpr size_t kScratchBytes = size_t{64} << 10;
  uint8_t* acquire_scratch() noexcept;
  bool is_scratch(const uint8_t* buffer) const noexcept;
  void release_scratch(uint8_t* buffer) noexcept;

  // Whether the pool handed `buffer` out (a pool or scratch buffer), as opposed to a buffer
  // another CUPTI client allocated (client_mux.h).
  bool owns(const uint8_t* buffer) const noexcept;

  size_t buffer_bytes() const { return buffer_bytes_; }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }  // lock-free
  uint32_t allocated() const;
  size_t scratch_bytes() const;  // the scratch buffers made so far (self_cost.memory)

 private:
  const size_t buffer_bytes_;
  const uint32_t max_buffers_;
  mutable std::mutex mu_;  // leaf lock
  std::vector<uint8_t*> free_;
  std::vector<uint8_t*> all_;
  struct Out {
    uint8_t* buffer;
    uint32_t step;
    uint64_t handout;  // handed_out_ before it
  };
  uint64_t handed_out_ = 0;  // under mu_
  std::vector<Out> out_;  // handed out, not released; capacity reserved for every buffer
  std::atomic<uint64_t> refused_{0};  // counted under mu_
  std::vector<uint8_t*> scratch_free_;
  std::vector<uint8_t*> scratch_all_;
};

}  // namespace traintime::cupti
