#include "buffer_pool.h"

#include <cstdint>
#include <cstdlib>

namespace traintime::cupti {

BufferPool::BufferPool(size_t buffer_bytes, uint32_t max_buffers)
    : buffer_bytes_((buffer_bytes + 7) & ~size_t{7}), max_buffers_(max_buffers) {
  free_.reserve(max_buffers_);
  all_.reserve(max_buffers_);
  out_.reserve(max_buffers_);
}

BufferPool::~BufferPool() {
  for (uint8_t* b : all_) std::free(b);
  for (uint8_t* b : scratch_all_) std::free(b);
}

namespace {

// A free buffer, else a new one while fewer than `limit` exist; nullptr when neither can be had.
// CUPTI requires 8-byte aligned buffers. `free` has room for every buffer in `all`, so release
// never allocates.
uint8_t* take(std::vector<uint8_t*>& free, std::vector<uint8_t*>& all, size_t bytes,
              size_t limit) noexcept {
  if (!free.empty()) {
    uint8_t* b = free.back();
    free.pop_back();
    return b;
  }
  if (all.size() >= limit) return nullptr;
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  if (!b) return nullptr;
  try {
    all.push_back(b);
    free.reserve(all.size());
  } catch (...) {
    std::free(b);
    return nullptr;
  }
  return b;
}

}  // namespace

uint8_t* BufferPool::acquire(uint32_t step) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  uint8_t* b = take(free_, all_, buffer_bytes_, max_buffers_);
  if (!b) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  if (out_.size() < out_.capacity()) out_.push_back({b, step, handed_out_});  // capacity: every buffer
  ++handed_out_;
  return b;
}

void BufferPool::release(uint8_t* buffer) noexcept {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(buffer);  // capacity reserved up front
  for (std::size_t i = 0; i < out_.size(); ++i) {
    if (out_[i].buffer == buffer) {
      out_[i] = out_.back();
      out_.pop_back();
      break;
    }
  }
}

uint32_t BufferPool::min_outstanding_step() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t m = UINT32_MAX;
  for (const Out& o : out_) m = o.step < m ? o.step : m;
  return m;
}

uint64_t BufferPool::handed_out() const {
  std::lock_guard<std::mutex> lock(mu_);
  return handed_out_;
}

uint64_t BufferPool::min_outstanding_handout() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t m = UINT64_MAX;
  for (const Out& o : out_) m = o.handout < m ? o.handout : m;
  return m;
}

uint8_t* BufferPool::acquire_scratch() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return take(scratch_free_, scratch_all_, kScratchBytes, SIZE_MAX);
}

bool BufferPool::owns(const uint8_t* buffer) const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (const uint8_t* b : all_)
    if (b == buffer) return true;
  for (const uint8_t* b : scratch_all_)
    if (b == buffer) return true;
  return false;
}

bool BufferPool::is_scratch(const uint8_t* buffer) const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (const uint8_t* b : scratch_all_)
    if (b == buffer) return true;
  return false;
}

void BufferPool::release_scratch(uint8_t* buffer) noexcept {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  scratch_free_.push_back(buffer);  // capacity reserved in acquire_scratch
}

uint32_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(all_.size());
}

size_t BufferPool::scratch_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scratch_all_.size() * kScratchBytes;
}

}  // namespace traintime::cupti
