// The activity buffer pool is bounded: when every buffer is out, CUPTI gets none (and drops).
#include <catch2/catch.hpp>

#include <cstdint>

#include "buffer_pool.h"

using traintime::cupti::BufferPool;

TEST_CASE("buffer pool hands out at most its limit, 8-byte aligned, and reuses released ones",
          "[buffer_pool]") {
  BufferPool pool(1001, 2);
  CHECK(pool.buffer_bytes() == 1008);  // rounded up to a multiple of 8
  uint8_t* a = pool.acquire();
  uint8_t* b = pool.acquire();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(reinterpret_cast<uintptr_t>(a) % 8 == 0);
  CHECK(reinterpret_cast<uintptr_t>(b) % 8 == 0);
  CHECK(pool.acquire() == nullptr);
  CHECK(pool.refused() == 1);
  pool.release(a);
  CHECK(pool.acquire() == a);
  CHECK(pool.allocated() == 2);
}

TEST_CASE("buffer pool knows the oldest step of the buffers still out", "[buffer_pool]") {
  BufferPool pool(1024, 4);
  CHECK(pool.min_outstanding_step() == UINT32_MAX);
  uint8_t* a = pool.acquire(3);
  uint8_t* b = pool.acquire(5);
  CHECK(pool.min_outstanding_step() == 3);
  pool.release(a);
  CHECK(pool.min_outstanding_step() == 5);
  uint8_t* c = pool.acquire(9);  // reuses a's memory
  CHECK(c == a);
  CHECK(pool.min_outstanding_step() == 5);
  pool.release(b);
  pool.release(c);
  CHECK(pool.min_outstanding_step() == UINT32_MAX);
}

TEST_CASE("buffer pool knows how many buffers it had handed out before each one still out", "[buffer_pool]") {
  BufferPool pool(1024, 4);
  CHECK(pool.handed_out() == 0);
  CHECK(pool.min_outstanding_handout() == UINT64_MAX);
  uint8_t* a = pool.acquire();
  uint8_t* b = pool.acquire();
  CHECK(pool.handed_out() == 2);
  CHECK(pool.min_outstanding_handout() == 0);
  pool.release(a);
  CHECK(pool.min_outstanding_handout() == 1);
  uint8_t* c = pool.acquire();  // a again, handed out third
  CHECK(c == a);
  pool.release(b);
  CHECK(pool.min_outstanding_handout() == 2);
  pool.release(c);
  CHECK(pool.min_outstanding_handout() == UINT64_MAX);
  CHECK(pool.handed_out() == 3);
}
