#include "traintime/core/fast_clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace traintime::core {

// Constant-initialised: usable from the first annotation, even from another constructor.
FastClock detail::g_process_clock;

bool FastClock::counter_trusted() noexcept {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  // Cast: gcc's cpuid.h returns unsigned, clang's int (-Wsign-compare in the fuzz build).
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000007u) return false;
  __cpuid(0x80000007u, a, b, c, d);
  if ((d & (1u << 8)) == 0) return false;  // not invariant: the rate changes with P-states
  // The kernel's own verdict: it keeps time with the TSC only while it trusts it.
  // open/read, not stdio: no allocation, once, on the calibrating thread.
  const int saved = errno;
  char source[8] = {};
  bool tsc = false;
  const int fd =
      ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, source, sizeof source - 1);
    tsc = n >= 3 && std::strncmp(source, "tsc", 3) == 0 && (n == 3 || source[3] == '\n');
    ::close(fd);
  }
  errno = saved;
  return tsc;
#elif defined(__aarch64__)
  return true;  // the architected generic timer: a constant rate, CLOCK_MONOTONIC's own source
#else
  return false;
#endif
}

uint64_t FastClock::slow() noexcept {
  if (trust_.load(std::memory_order_relaxed) == Trust::kClockGettime) return clock_gettime_ns();
  const uint64_t n = clock_gettime_ns();
  const uint64_t first_ns = first_ns_.load(std::memory_order_relaxed);
  // Until kCalibrateNs after the first anchor there is nothing to do but read the clock.
  if (first_ns != 0 && n - first_ns < kCalibrateNs && mult_.load(std::memory_order_relaxed) == 0) return n;
  if (busy_.exchange(true, std::memory_order_acquire)) return n;
  // The anchor: the tightest pair of a few (a thread preempted between the readings would shift
  // every conversion until the next anchor).
  uint64_t t = 0, na = 0;
  if (!anchor_pair(&t, &na)) {
    busy_.store(false, std::memory_order_release);
    return n;
  }
  if (trust_.load(std::memory_order_relaxed) == Trust::kCheck)
    trust_.store(counter_trusted() ? Trust::kCounter : Trust::kClockGettime, std::memory_order_relaxed);
  if (trust_.load(std::memory_order_relaxed) == Trust::kCounter) {
    if (first_ns_.load(std::memory_order_relaxed) == 0) {
      first_tsc_.store(t, std::memory_order_relaxed);
      first_ns_.store(na, std::memory_order_relaxed);
    } else if (const uint64_t first_tsc = first_tsc_.load(std::memory_order_relaxed); t > first_tsc) {
      const uint64_t span_ns = na - first_ns_.load(std::memory_order_relaxed);
      const auto m = static_cast<uint64_t>((static_cast<unsigned __int128>(span_ns) << 32) / (t - first_tsc));
      if (m != 0) {
        const auto due = static_cast<uint64_t>((static_cast<unsigned __int128>(kAnchorNs) << 32) / m);
        const uint32_t s = seq_.load(std::memory_order_relaxed);
        seq_.store(s + 1, std::memory_order_relaxed);
        tsc0_.store(t, std::memory_order_release);
        ns0_.store(na, std::memory_order_release);
        mult_.store(m, std::memory_order_release);
        due_.store(due, std::memory_order_release);
        seq_.store(s + 2, std::memory_order_release);
      }
    }
  }
  busy_.store(false, std::memory_order_release);
  return n;
}

bool FastClock::anchor_pair(uint64_t* tsc, uint64_t* ns) noexcept {
  uint64_t best = ~uint64_t{0};
  for (int i = 0; i < 4; ++i) {
    const uint64_t t1 = counter();
    const uint64_t ni = clock_gettime_ns();
    const uint64_t t2 = counter();
    if (t2 >= t1 && t2 - t1 < best) {
      best = t2 - t1;
      *tsc = t1 + (t2 - t1) / 2;
      *ns = ni;
    }
  }
  return best != ~uint64_t{0};
}

bool FastClock::ticks_from_counter() noexcept {
  Trust t = trust_.load(std::memory_order_acquire);
  if (__builtin_expect(t == Trust::kCheck, 0)) {
    Trust expected = Trust::kCheck;
    trust_.compare_exchange_strong(expected, counter_trusted() ? Trust::kCounter : Trust::kClockGettime,
                                   std::memory_order_acq_rel);
    t = trust_.load(std::memory_order_acquire);
  }
  if (t != Trust::kCounter) return false;
  if (first_ns_.load(std::memory_order_acquire) == 0) now_ns();  // the first anchor
  return true;
}

uint64_t FastClock::ticks_to_ns(uint64_t ticks) noexcept {
  if (trust_.load(std::memory_order_acquire) != Trust::kCounter) return ticks;
  uint64_t m = mult_.load(std::memory_order_acquire);
  if (m == 0) {
    // Not calibrated yet (the run is younger than kCalibrateNs): the rate from the first anchor,
    // over at least 1 ms so that the anchors' own error stays below a part in 10^4.
    if (first_ns_.load(std::memory_order_acquire) == 0) now_ns();
    const uint64_t first_tsc = first_tsc_.load(std::memory_order_acquire);
    const uint64_t first_ns = first_ns_.load(std::memory_order_acquire);
    if (first_ns == 0) return ticks;  // no anchor could be taken: the best there is
    while (clock_gettime_ns() - first_ns < 1'000'000) {
    }
    uint64_t t = 0, na = 0;
    if (!anchor_pair(&t, &na) || t <= first_tsc || na <= first_ns) return ticks;
    m = static_cast<uint64_t>((static_cast<unsigned __int128>(na - first_ns) << 32) / (t - first_tsc));
  }
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * m) >> 32);
}

uint64_t FastClock::pair_ticks() noexcept {
  uint64_t measured = pair_ticks_.load(std::memory_order_relaxed);
  if (measured != 0) return measured;
  // The median: a pair the thread was preempted in, or whose readings the core overlapped with
  // nothing, is at either end.
  constexpr int kPairs = 63;
  uint64_t d[kPairs];
  ticks();  // the trust decision and the first anchor, outside the measurement
  for (uint64_t& x : d) {
    const uint64_t a = ticks();
    const uint64_t b = ticks();
    x = b >= a ? b - a : 0;
  }
  std::nth_element(d, d + kPairs / 2, d + kPairs);
  measured = d[kPairs / 2] > 0 ? d[kPairs / 2] : 1;
  pair_ticks_.store(measured, std::memory_order_relaxed);
  return measured;
}

double FastClock::ns_per_tick() noexcept {
  if (!ticks_from_counter()) return 1.0;
  constexpr uint64_t kSpan = uint64_t{1} << 32;
  return static_cast<double>(ticks_to_ns(kSpan)) / static_cast<double>(kSpan);
}

uint64_t FastClock::ticks_for_ns(uint64_t ns) noexcept {
  if (trust_.load(std::memory_order_relaxed) != Trust::kCounter) return ns;
  const uint64_t m = mult_.load(std::memory_order_relaxed);  // ns per tick, 32.32
  if (m == 0) return ns * 5;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ns) << 32) / m);
}

bool FastClock::take_anchor(Anchor& a, uint64_t* now) noexcept {
  if (mult_.load(std::memory_order_relaxed) == 0) return false;
  const uint32_t s = seq_.load(std::memory_order_acquire);
  Anchor x;
  x.tsc0 = tsc0_.load(std::memory_order_acquire);
  x.ns0 = ns0_.load(std::memory_order_acquire);
  x.mult = mult_.load(std::memory_order_acquire);
  x.due = due_.load(std::memory_order_acquire);
  if ((s & 1) != 0 || seq_.load(std::memory_order_acquire) != s) return false;
  const uint64_t d = counter() - x.tsc0;
  if (d >= x.due) return false;
  a = x;
  if (now) *now = x.ns0 + static_cast<uint64_t>((static_cast<unsigned __int128>(d) * x.mult) >> 32);
  return true;
}

uint64_t FastClock::refresh(Anchor& a) noexcept {
  uint64_t now;
  if (take_anchor(a, &now)) return now;
  // Nothing published covers now: the clock, which re-anchors when that is due, and then the
  // new anchor for the next readings (none while another thread calibrates or the counter is
  // not trusted: the copy stays empty and the next reading comes back here).
  now = slow();
  if (!take_anchor(a, nullptr)) a.due = 0;
  return now;
}

}  // namespace traintime::core
