// GpuCapture's parts on their own: the activity queue and its processing thread (when it
// ingests, flushes and stops) and the live publisher (what the metrics thread reads).
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "activity_queue.h"
#include "live_publisher.h"

using traintime::cupti::ActivityQueue;
using traintime::cupti::LivePublisher;

namespace {

// Records what the queue asked of it, in order; ingest can be held until released.
class RecordingConsumer final : public ActivityQueue::Consumer {
 public:
  uint32_t steps_completed() const override { return 0; }
  bool live() override { return false; }
  void flush(bool forced) override { note(forced ? "forced flush" : "flush"); }
  void publish_live() override { note("publish"); }
  void finish() override { note("finish"); }
  void ingest(const ActivityQueue::Completed& item) override {
    std::unique_lock<std::mutex> lock(mu_);
    held_cv_.wait(lock, [&] { return !hold_; });
    events_.push_back("ingest " + std::to_string(item.valid_size));
  }
  void hold(bool on) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_ = on;
    }
    held_cv_.notify_all();
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  void note(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(what);
  }
  std::mutex mu_;
  std::condition_variable held_cv_;
  bool hold_ = false;
  std::vector<std::string> events_;
};

size_t count(const std::vector<std::string>& events, const std::string& what) {
  size_t n = 0;
  for (const std::string& e : events) n += e == what;
  return n;
}

uint8_t g_buffers[4][8];

}  // namespace

TEST_CASE("activity queue ingests buffers in completion order and a drain waits for them",
          "[capture_parts]") {
  RecordingConsumer consumer;
  ActivityQueue queue;
  consumer.hold(true);
  queue.start(4, consumer);
  for (size_t i = 0; i < 3; ++i) queue.push({g_buffers[i], i + 1, false});
  consumer.hold(false);
  REQUIRE(queue.drain());
  std::vector<std::string> ingested;
  for (const std::string& e : consumer.events())
    if (e.rfind("ingest", 0) == 0) ingested.push_back(e);
  CHECK(ingested == std::vector<std::string>{"ingest 1", "ingest 2", "ingest 3"});
  queue.stop();
  const std::vector<std::string> events = consumer.events();
  CHECK(count(events, "finish") == 1);
  CHECK(events.back() == "finish");
}

TEST_CASE("activity queue runs a signal's forced flush on its thread and waits for it",
          "[capture_parts]") {
  RecordingConsumer consumer;
  ActivityQueue queue;
  queue.start(4, consumer);
  CHECK(queue.force(traintime::core::Deadline::after(std::chrono::seconds(10))));
  CHECK(count(consumer.events(), "forced flush") == 1);
  queue.stop();
}

TEST_CASE("activity queue gives up a forced flush at its deadline while a buffer is still being ingested",
          "[capture_parts]") {
  RecordingConsumer consumer;
  ActivityQueue queue;
  consumer.hold(true);
  queue.start(4, consumer);
  queue.push({g_buffers[0], 1, false});
  CHECK_FALSE(queue.force(traintime::core::Deadline::after(std::chrono::milliseconds(50))));
  consumer.hold(false);
  queue.stop();
  CHECK(count(consumer.events(), "ingest 1") == 1);
}

TEST_CASE("live publisher hands out nothing before the first step, then the latest", "[capture_parts]") {
  LivePublisher live;
  CHECK_FALSE(live.enabled());
  live.enable();
  CHECK(live.enabled());
  traintime::core::GpuStepFigures out;
  uint64_t late = 99;
  CHECK_FALSE(live.step(&out, &late));
  CHECK(late == 0);
  CHECK(live.published_step() == -1);

  traintime::core::GpuStepFigures figures;
  figures.step = 7;
  figures.busy_ns = 1234;
  LivePublisher::DetectedLive counters;
  counters.totals.steps = 8;
  counters.last_wall_ns = 55;
  live.publish(figures, counters, false);
  live.set_late(3);
  REQUIRE(live.step(&out, &late));
  CHECK(out.step == 7);
  CHECK(out.busy_ns == 1234);
  CHECK(late == 3);
  CHECK(live.published_step() == 7);
  traintime::core::StepCounters totals;
  uint64_t last_wall_ns = 0;
  CHECK_FALSE(live.detected_steps(&totals, &last_wall_ns));  // marker steps: none detected

  figures.step = 8;
  live.publish(figures, counters, true);
  REQUIRE(live.detected_steps(&totals, &last_wall_ns));
  CHECK(totals.steps == 8);
  CHECK(last_wall_ns == 55);
  REQUIRE(live.step(&out, &late));
  CHECK(out.step == 8);
}
