#include "buffer_pool.h"

#include <cstdlib>

namespace traintime::cupti {

BufferPool::BufferPool(size_t buffer_bytes, uint32_t max_buffers)
    : buffer_bytes_((buffer_bytes + 7) & ~size_t{7}), max_buffers_(max_buffers) {
  free_.reserve(max_buffers_);
  all_.reserve(max_buffers_);
}

BufferPool::~BufferPool() {
  for (uint8_t* b : all_) std::free(b);
}

uint8_t* BufferPool::acquire() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  if (all_.size() < max_buffers_) {
    // CUPTI requires 8-byte aligned buffers.
    if (auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes_))) {
      all_.push_back(b);  // capacity reserved up front: no reallocation here
      return b;
    }
  }
  ++refused_;
  return nullptr;
}

void BufferPool::release(uint8_t* buffer) noexcept {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(buffer);  // capacity reserved up front
}

uint64_t BufferPool::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

uint32_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(all_.size());
}

}  // namespace traintime::cupti
