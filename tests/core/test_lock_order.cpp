// core/lock_order.h: a terminating signal's write never waits for a lock past its deadline, and
// falls back on what the module last published, saying so (summary_from_last_publish). The
// registry's summary is the example: its step tracker's lock held by a thread that never lets go
// (a step sink that blocks, as a thread stopped by the signal inside a step would).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "traintime/core/core_counters.h"
#include "traintime/core/lock_order.h"
#include "traintime/core/region_registry.h"

using namespace traintime::core;
using namespace std::chrono_literals;

namespace {

// Holds `mu` on another thread until release() (a thread stopped while holding a lock).
class Holder {
 public:
  explicit Holder(std::mutex& mu) {
    thread_ = std::thread([this, &mu] {
      std::lock_guard<std::mutex> lock(mu);
      held_.store(true);
      while (!release_.load()) std::this_thread::sleep_for(1ms);
    });
    while (!held_.load()) std::this_thread::sleep_for(1ms);
  }
  ~Holder() { release(); }
  void release() {
    release_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> held_{false}, release_{false};
  std::thread thread_;
};

// A step sink that stops inside the step tracker's lock until told to go on.
std::atomic<bool> g_sink_blocks{false};
std::atomic<bool> g_sink_inside{false};
void blocking_sink(const LiveSteps&) noexcept {
  if (!g_sink_blocks.load()) return;
  g_sink_inside.store(true);
  while (g_sink_blocks.load()) std::this_thread::sleep_for(1ms);
  g_sink_inside.store(false);
}

}  // namespace

TEST_CASE("lock_until: a free lock at once, a held one only until the deadline", "[lock_order]") {
  std::mutex mu;
  {
    std::unique_lock<std::mutex> lock(mu, std::defer_lock);
    CHECK(lock_until(lock, Deadline::after(50ms)));
    CHECK(lock.owns_lock());
  }
  Holder holder(mu);
  std::unique_lock<std::mutex> lock(mu, std::defer_lock);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(lock_until(lock, Deadline::after(100ms)));
  CHECK_FALSE(lock.owns_lock());
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  CHECK_FALSE(Deadline::never().bounded());
  holder.release();
  CHECK(lock_until(lock, Deadline::never()));  // waits as long as it takes: never() only
}

TEST_CASE("LastPublished: nothing before the first publication, then the latest", "[lock_order]") {
  LastPublished<std::string> last;
  CHECK(last.get(Deadline::never()).figures == nullptr);
  last.publish("first");
  last.publish("second");
  const auto v = last.get(Deadline::after(10ms));
  REQUIRE(v.figures != nullptr);
  CHECK(*v.figures == "second");
}

namespace m_table {
std::string m_last_publish(uint64_t, const ModuleCounters& all) { return last_publish_message("the m figures", all); }
#define M_COUNTERS(X) TRAINTIME_LAST_PUBLISH_COUNTERS(X, &m_last_publish)
const CounterSpec kCounters[] = {M_COUNTERS(TRAINTIME_COUNTER_SPEC)};
}  // namespace m_table

TEST_CASE("a counter read by its table's enum is the one counted under its key", "[lock_order]") {
  enum class M : uint16_t { M_COUNTERS(TRAINTIME_COUNTER_ENUM) };
  ModuleCounters all;
  all.counters["last_publish_age_ms"] = 42;
  all.counters["summary_from_last_publish"] = 1;
  CHECK(counter(all, m_table::kCounters, M::last_publish_age_ms) == 42);
  CHECK(counter(all, m_table::kCounters, M::summary_from_last_publish) == 1);
  CHECK(counter(all, m_table::kCounters, M::last_publish_missing) == 0);  // not counted
}

TEST_CASE("count_last_publish: the counter, and one warning saying how old the figures are",
          "[lock_order]") {
  LastPublished<int> last;
  Section none("m");
  count_last_publish<int>(none, m_table::kCounters, last.get(Deadline::never()));
  CHECK(none.counters.counters.at("summary_from_last_publish") == 1);
  CHECK(none.counters.counters.at("last_publish_missing") == 1);
  REQUIRE(none.warnings.size() == 1);
  CHECK(none.warnings[0].rfind("the m figures are missing (none had been published yet): a lock", 0) == 0);
  last.publish(7);
  Section some("m");
  count_last_publish<int>(some, m_table::kCounters, last.get(Deadline::never()));
  CHECK(some.counters.counters.at("summary_from_last_publish") == 1);
  CHECK(some.counters.counters.at("last_publish_missing") == 0);
  REQUIRE(some.warnings.size() == 1);
  CHECK(some.warnings[0].rfind("the m figures are those last published, ", 0) == 0);
  CHECK(some.warnings[0].find("ms before this file") != std::string::npos);
}

TEST_CASE("a region summary whose lock is held past the deadline is the last published one",
          "[lock_order]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  const NameId fwd = reg.register_name("forward", kCategoryAuto);
  reg.push_id(ts, fwd, 0);
  reg.pop(ts, 10);
  reg.step(ts, 100, 0, 0);
  const CpuSummary published = reg.summary();  // what a snapshot hands out
  REQUIRE(published.steps.count == 1);
  CHECK(published.section.counters.counters.count("summary_from_last_publish") == 0);

  // Another step, whose sink stops inside the step tracker's lock.
  reg.steps().set_sink(&blocking_sink);
  g_sink_blocks.store(true);
  std::thread stepping([&] { reg.step(ts, 200, 0, 0); });
  while (!g_sink_inside.load()) std::this_thread::sleep_for(1ms);

  const auto start = std::chrono::steady_clock::now();
  const CpuSummary at_signal = reg.summary(Deadline::after(200ms));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 200ms);
  CHECK(waited < 10s);
  CHECK(at_signal.steps.count == 1);  // the published figures, not the step in progress
  CHECK(at_signal.regions.size() == published.regions.size());
  CHECK(at_signal.section.counters.counters.at("summary_from_last_publish") == 1);
  REQUIRE_FALSE(at_signal.section.warnings.empty());
  CHECK(at_signal.section.warnings.back().rfind("the region and step figures are those last published", 0) == 0);

  g_sink_blocks.store(false);
  stepping.join();
  reg.steps().set_sink(nullptr);
  const CpuSummary after = reg.summary(Deadline::after(200ms));
  CHECK(after.steps.count == 2);
  CHECK(after.section.counters.counters.count("summary_from_last_publish") == 0);
}
