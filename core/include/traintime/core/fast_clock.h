// CLOCK_MONOTONIC in nanoseconds for the annotation hot path, read from the CPU's own counter
// where it can be trusted: rdtsc on x86-64 when the TSC is invariant (CPUID 80000007H:EDX[8])
// and the kernel itself keeps time with it (its clocksource is "tsc": a VM whose TSC the kernel
// marked unstable has switched away), cntvct_el0 on aarch64; elsewhere, and until calibrated,
// clock_gettime itself.
//
// A counter reading becomes nanoseconds by one multiply from an anchor (a counter reading and a
// clock_gettime taken back to back). The rate is measured against CLOCK_MONOTONIC from the first
// anchor (at least kCalibrateNs before it is used) and re-measured, with a fresh anchor, once
// kAnchorNs has passed, so the error stays far below a microsecond and never accumulates. The
// anchor is published as a seqlock; a reader that races a re-anchoring falls back to
// clock_gettime for that one reading. A thread may keep its own copy of the anchor (Anchor,
// now_ns(Anchor&): the annotation hot path) and read from it without touching shared memory
// until it expires, when it takes the published one again. No lock, no allocation, errno
// untouched.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

namespace traintime::core {

class FastClock {
 public:
  enum class Trust : uint8_t { kCheck, kCounter, kClockGettime };
  static constexpr uint64_t kCalibrateNs = 10'000'000;  // 10 ms between the first two anchors
  static constexpr uint64_t kAnchorNs = 100'000'000;    // then a fresh anchor every 100 ms

  // kCheck: decide at the first calibration (CPUID and the kernel's clocksource).
  constexpr explicit FastClock(Trust trust = Trust::kCheck) : trust_(trust) {}

  uint64_t now_ns() noexcept {
    if (mult_.load(std::memory_order_relaxed) != 0) {
      const uint32_t s = seq_.load(std::memory_order_acquire);
      const uint64_t t0 = tsc0_.load(std::memory_order_acquire);
      const uint64_t n0 = ns0_.load(std::memory_order_acquire);
      const uint64_t m = mult_.load(std::memory_order_acquire);
      const uint64_t due = due_.load(std::memory_order_acquire);
      if ((s & 1) == 0 && seq_.load(std::memory_order_acquire) == s) {
        const uint64_t d = counter() - t0;  // wraps to huge before the anchor: slow path
        if (d < due) return n0 + static_cast<uint64_t>((static_cast<unsigned __int128>(d) * m) >> 32);
      }
    }
    return slow();
  }

  // One thread's copy of the anchor, owned by that thread (no atomics). Zero-initialised it is
  // empty: the first reading fills it.
  struct Anchor {
    uint64_t tsc0;  // counter reading of the anchor
    uint64_t due;   // counts after tsc0 until the copy expires; 0: empty, or no counter
    uint64_t ns0;   // CLOCK_MONOTONIC at tsc0
    uint64_t mult;  // ns per count, 32.32 fixed point
  };

  // now_ns() from the caller's own copy of the anchor: the counter, a compare, one multiply.
  // When the copy has expired (or the counter is not used) the published anchor is copied in,
  // re-anchoring first when it is due, and the reading comes from it (or from clock_gettime).
  uint64_t now_ns(Anchor& a) noexcept {
    uint64_t now;
    return __builtin_expect(read(a, &now), 1) ? now : refresh(a);
  }

  // The reading from the copy alone, when it covers now (callers that keep their fast path
  // free of calls take now_ns(Anchor&) on false).
  static bool read(const Anchor& a, uint64_t* now) noexcept {
#if defined(__x86_64__) || defined(__aarch64__)
    const uint64_t d = counter() - a.tsc0;  // wraps to huge before the anchor
    *now = a.ns0 + static_cast<uint64_t>((static_cast<unsigned __int128>(d) * a.mult) >> 32);
    return d < a.due;
#else
    (void)a;
    (void)now;
    return false;
#endif
  }

  // True once readings come from the counter.
  bool counting() const noexcept { return mult_.load(std::memory_order_relaxed) != 0; }

  // Ticks: what the annotation hot path records (DESIGN §9: the counter on the hot path,
  // nanoseconds only when a file is built). The CPU's counter itself where it is trusted, else
  // clock_gettime's nanoseconds; decided at the first call of ticks_from_counter() and never
  // changed, so every tick reading of a process is in one unit. That first call also takes the
  // first anchor, from which ticks_to_ns measures the rate.
  bool ticks_from_counter() noexcept;
  uint64_t ticks() noexcept { return ticks_from_counter() ? counter() : clock_gettime_ns(); }
  // A duration in ticks, in nanoseconds: at the rate measured from the first anchor to the
  // latest (for a run shorter than the calibration, measured now, at least 1 ms after the first
  // anchor). Ticks that are nanoseconds come back unchanged.
  uint64_t ticks_to_ns(uint64_t ticks) noexcept;

  static uint64_t clock_gettime_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  }

  static uint64_t counter() noexcept {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    asm volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return clock_gettime_ns();
#endif
  }

  // Whether this machine's counter can stand in for CLOCK_MONOTONIC (see the top).
  static bool counter_trusted() noexcept;

  // What timing its own code costs (core/self_cost.h). The cost of two back-to-back ticks()
  // readings: the median of 63 pairs, measured at the first call (the preload asks at
  // activation, before any hot path times a call), then kept.
  uint64_t pair_ticks() noexcept;
  // Nanoseconds per tick, as ticks_to_ns converts (may wait up to 1 ms for the rate in a process
  // younger than the calibration: not for a hot path). 1 when ticks are nanoseconds.
  double ns_per_tick() noexcept;
  // A duration in ticks, roughly and at once (never waits): at the published rate, or at
  // 5 ticks per ns before there is one (so the duration is never underestimated by much).
  uint64_t ticks_for_ns(uint64_t ns) noexcept;

 private:
  uint64_t slow() noexcept;  // clock_gettime, and the (re)calibration when due
  // A counter reading and the clock between two counter readings, the tightest of a few; false
  // when the counter went backwards every time.
  static bool anchor_pair(uint64_t* tsc, uint64_t* ns) noexcept;
  uint64_t refresh(Anchor& a) noexcept;  // now_ns(Anchor&) when the copy does not cover now
  // Copies the published anchor into `a` if it is consistent and covers now (and then gives
  // the reading in *now when asked).
  bool take_anchor(Anchor& a, uint64_t* now) noexcept;

  std::atomic<Trust> trust_;
  std::atomic<bool> busy_{false};  // one thread calibrates at a time; the others read the clock
  std::atomic<uint32_t> seq_{0};   // odd while the anchor below is rewritten
  std::atomic<uint64_t> tsc0_{0}, ns0_{0};
  std::atomic<uint64_t> mult_{0};  // ns per count in 32.32 fixed point; 0: clock_gettime
  std::atomic<uint64_t> due_{0};   // counts after the anchor at which a new one is due
  std::atomic<uint64_t> first_tsc_{0}, first_ns_{0};  // the first anchor: the rate's baseline
  std::atomic<uint64_t> pair_ticks_{0};  // 0: not measured yet
};

namespace detail {
extern FastClock g_process_clock;  // constant-initialised: usable from any constructor
}  // namespace detail

// The process's clock: what the preload's annotations, steps and regions read.
inline FastClock& process_clock() noexcept { return detail::g_process_clock; }

}  // namespace traintime::core
