// Annotation cost (DESIGN §9 rows 1-2). scripts/bench.sh runs this binary twice: once under
// LD_PRELOAD=libtraintime.so, where a push+pop pair is judged against two raw time-stamp
// counter reads timed in the same process (the yardstick travels with the machine's speed; two
// clock_gettime calls are timed too, for reference), and once without the preload, where a pair
// must stay a predictable branch (≤ 1 ns).
#include <benchmark/benchmark.h>
#include <stdint.h>
#include <time.h>

#include <traintime/traintime.h>
#include "traintime/core/fast_clock.h"

namespace {

// The yardstick: a region's CPU time needs one clock read at push and one at pop.
void BM_ClockGettimePair(benchmark::State& state) {
  timespec a{}, b{};
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_MONOTONIC, &b);
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
  }
}
BENCHMARK(BM_ClockGettimePair);

// The floor: a region needs a time at push and one at pop, and the cheapest is the CPU's counter
// (rdtsc on x86-64, cntvct_el0 on aarch64; elsewhere the clock pair again): the very read the
// preload's clock makes (fast_clock.h).
inline uint64_t counter() { return traintime::core::FastClock::counter(); }

void BM_RdtscPair(benchmark::State& state) {
  for (auto _ : state) {
    uint64_t a = counter();
    benchmark::DoNotOptimize(a);
    uint64_t b = counter();
    benchmark::DoNotOptimize(b);
  }
}
BENCHMARK(BM_RdtscPair);

// The C API with a name (looked up by the library on every push).
void BM_TtPushPop(benchmark::State& state) {
  for (auto _ : state) {
    tt_push("bench_region");
    benchmark::ClobberMemory();
    tt_pop();
  }
}
BENCHMARK(BM_TtPushPop);

// The C++ RAII macro: the name is registered once per call site, then push_id/pop.
void BM_TtScope(benchmark::State& state) {
  for (auto _ : state) {
    TT_SCOPE("bench_scope");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_TtScope);

// A region nested under an open one, as layer regions are under forward.
void BM_TtScopeNested(benchmark::State& state) {
  TT_SCOPE("forward");
  for (auto _ : state) {
    TT_SCOPE("layer0");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_TtScopeNested);

// tt_step: the step tracker and, preloaded, the always-current record's step counters stored
// into their mapped page (DESIGN §9: the record costs <= 1 us per step; this is the whole step
// mark, so the record's share is less).
void BM_TtStep(benchmark::State& state) {
  for (auto _ : state) {
    tt_step(8, 4096);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_TtStep);

}  // namespace

BENCHMARK_MAIN();
