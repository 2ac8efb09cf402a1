#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <thread>

#include "traintime/core/region_registry.h"

using namespace traintime::core;

namespace {

const RegionRow* find_row(const std::vector<RegionRow>& rows, const std::string& path) {
  for (const auto& r : rows)
    if (r.path == path) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("regions nest per thread into slash-separated paths with CPU time", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  const NameId step = reg.register_name("step", kCategoryAuto);
  const NameId fwd = reg.register_name("forward", kCategoryAuto);
  const NameId layer = reg.register_name("layer3", kCategoryAuto);

  for (int i = 0; i < 2; ++i) {
    const uint64_t t = 1000 * static_cast<uint64_t>(i);
    reg.push_id(ts, step, t + 0);
    reg.push_id(ts, fwd, t + 10);
    reg.push_id(ts, layer, t + 20);
    reg.pop(ts, t + 25 + static_cast<uint64_t>(i) * 10);  // layer3: 5 then 15
    reg.pop(ts, t + 60);                                   // forward: 50
    reg.pop(ts, t + 100);                                  // step: 100
  }
  const auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == 3);
  const RegionRow* l = find_row(rows, "step/forward/layer3");
  REQUIRE(l);
  CHECK(l->count == 2);
  CHECK(l->cpu_ns == 20);
  CHECK(l->cpu_min_ns == 5);
  CHECK(l->cpu_max_ns == 15);
  const RegionRow* f = find_row(rows, "step/forward");
  REQUIRE(f);
  CHECK(f->cpu_ns == 100);
  CHECK(find_row(rows, "step")->cpu_ns == 200);
  CHECK(reg.unbalanced_pops() == 0);
}

TEST_CASE("the same name under different parents gives different paths", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  reg.push(ts, "forward", kCategoryAuto, 0);
  reg.push(ts, "attention", kCategoryAuto, 1);
  reg.pop(ts, 2);
  reg.pop(ts, 3);
  reg.push(ts, "backward", kCategoryAuto, 4);
  reg.push(ts, "attention", kCategoryAuto, 5);
  reg.pop(ts, 6);
  reg.pop(ts, 7);
  std::vector<PathId> ids;
  const auto rows = reg.snapshot_rows(&ids);
  REQUIRE(rows.size() == 4);
  REQUIRE(ids.size() == 4);
  const RegionRow* fa = find_row(rows, "forward/attention");
  const RegionRow* ba = find_row(rows, "backward/attention");
  REQUIRE(fa);
  REQUIRE(ba);
  // The category of a name without a rule match comes from its parent.
  CHECK(fa->category == Category::kForward);
  CHECK(ba->category == Category::kBackward);
  for (std::size_t i = 0; i < rows.size(); ++i) CHECK(reg.path_string(ids[i]) == rows[i].path);
}

TEST_CASE("category resolution: explicit, rules, parent, other; step is a marker", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  // Explicit category beats the rules: "forward_loader" would match forward by rule order.
  reg.push(ts, "forward_loader", static_cast<int>(Category::kIo), 0);
  reg.pop(ts, 1);
  reg.push(ts, "unknown_thing", kCategoryAuto, 2);
  reg.pop(ts, 3);
  reg.push(ts, "optimizer", kCategoryAuto, 4);
  reg.push(ts, "step", kCategoryAuto, 5);  // inherits optimizer from its parent, not a rule
  reg.pop(ts, 6);
  reg.pop(ts, 7);
  reg.push(ts, "step", kCategoryAuto, 8);
  reg.push(ts, "clip_grads", kCategoryAuto, 9);
  reg.pop(ts, 10);
  reg.pop(ts, 11);
  const auto rows = reg.snapshot_rows();
  CHECK(find_row(rows, "forward_loader")->category == Category::kIo);
  CHECK(find_row(rows, "unknown_thing")->category == Category::kOther);
  CHECK(find_row(rows, "optimizer/step")->category == Category::kOptimizer);
  CHECK(find_row(rows, "step")->category == Category::kOther);
  CHECK(find_row(rows, "step/clip_grads")->category == Category::kOther);
}

TEST_CASE("configured rules decide categories and 'step' still never takes one", "[region]") {
  std::string err;
  auto rules = CategoryRules::parse("optimizer=step,clip", &err);
  REQUIRE(rules);
  RegionRegistry reg(*rules);
  ThreadState* ts = reg.thread_state();
  reg.push(ts, "step", kCategoryAuto, 0);
  reg.push(ts, "grad_clip", kCategoryAuto, 1);
  reg.pop(ts, 2);
  reg.pop(ts, 3);
  const auto rows = reg.snapshot_rows();
  CHECK(find_row(rows, "step")->category == Category::kOther);
  CHECK(find_row(rows, "step/grad_clip")->category == Category::kOptimizer);
}

TEST_CASE("recompute is an explicit category; regions below it inherit it", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  const NameId rc = reg.register_name("recompute", static_cast<int>(Category::kRecompute));
  REQUIRE(rc != kNoName);
  reg.push(ts, "backward", kCategoryAuto, 0);
  reg.push_id(ts, rc, 1);
  reg.push(ts, "attn", kCategoryAuto, 2);
  reg.pop(ts, 3);
  reg.pop(ts, 4);
  reg.pop(ts, 5);
  reg.push(ts, "recompute", kCategoryAuto, 6);  // never derived from the name
  reg.pop(ts, 7);
  const auto rows = reg.snapshot_rows();
  CHECK(find_row(rows, "backward/recompute")->category == Category::kRecompute);
  CHECK(find_row(rows, "backward/recompute/attn")->category == Category::kRecompute);
  CHECK(find_row(rows, "backward/recompute/attn")->category != Category::kBackward);
  CHECK(find_row(rows, "backward")->category == Category::kBackward);
  CHECK(find_row(rows, "recompute")->category == Category::kOther);
}

TEST_CASE("names register once; invalid names and ids are refused without crashing", "[region]") {
  RegionRegistry reg;
  const NameId a = reg.register_name("forward", kCategoryAuto);
  CHECK(a != kNoName);
  CHECK(reg.register_name("forward", kCategoryAuto) == a);
  CHECK(reg.register_name("forward", static_cast<int>(Category::kIo)) != a);
  CHECK(reg.register_name("", kCategoryAuto) == kNoName);
  CHECK(reg.register_name("x", 42) == kNoName);
  CHECK(reg.register_name("x", static_cast<int>(Category::kUnattributed)) == kNoName);

  ThreadState* ts = reg.thread_state();
  reg.push_id(ts, 999999, 0);  // never registered: a frame with no path, popped silently
  reg.push(ts, nullptr, kCategoryAuto, 1);
  CHECK(ts->depth() == 2);
  reg.pop(ts, 2);
  reg.pop(ts, 3);
  CHECK(reg.snapshot_rows().empty());
  CHECK(reg.unbalanced_pops() == 0);
}

TEST_CASE("a reused name buffer holding new text is not misattributed", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  char buf[32];
  std::strcpy(buf, "forward");
  reg.push(ts, buf, kCategoryAuto, 0);
  reg.pop(ts, 1);
  std::strcpy(buf, "backward");
  reg.push(ts, buf, kCategoryAuto, 2);
  reg.pop(ts, 3);
  const auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == 2);
  CHECK(find_row(rows, "forward")->count == 1);
  CHECK(find_row(rows, "backward")->count == 1);
  CHECK(find_row(rows, "backward")->category == Category::kBackward);
}

namespace {

const void* g_read_only = nullptr;  // the one address fake_read_only calls read-only
int g_read_only_asked = 0;

bool fake_read_only(const void* p) {
  ++g_read_only_asked;
  return p == g_read_only;
}

}  // namespace

TEST_CASE("text in read-only memory is trusted without a compare until an object is unloaded",
          "[region]") {
  RegionRegistry reg;
  reg.set_constant_text(&fake_read_only);
  ThreadState* ts = reg.thread_state();
  // `trusted` stands for a string literal: the registry is told it is read-only, so the pointer
  // cache does not compare its text. Changing it anyway shows which hits looked.
  char trusted[32];
  char heap[32];
  g_read_only = trusted;
  g_read_only_asked = 0;
  auto count_of = [&reg](const std::string& path) -> uint64_t {
    const auto rows = reg.snapshot_rows();
    const RegionRow* r = find_row(rows, path);
    return r ? r->count : 0;
  };
  auto region = [&](const char* name) {
    reg.push(ts, name, kCategoryAuto, 0);
    reg.pop(ts, 1);
  };
  std::strcpy(trusted, "forward");
  region(trusted);
  region(trusted);
  CHECK(g_read_only_asked == 1);  // once, when the pointer entered the cache
  std::strcpy(trusted, "backward");
  region(trusted);
  CHECK(count_of("forward") == 3);  // trusted: not read
  CHECK(count_of("backward") == 0);
  // Memory the registry may not trust is compared on every hit, as before.
  std::strcpy(heap, "io");
  region(heap);
  std::strcpy(heap, "optimizer");
  region(heap);
  CHECK(count_of("io") == 1);
  CHECK(count_of("optimizer") == 1);
  // An object was unloaded: the trusted address may hold another object's text now.
  const int asked = g_read_only_asked;
  reg.forget_constant_text();
  region(trusted);
  CHECK(count_of("backward") == 1);
  CHECK(g_read_only_asked == asked + 1);  // the pointer re-entered the cache: asked again
  region(trusted);
  CHECK(g_read_only_asked == asked + 1);  // and trusted again
  // A pointer whose text still matches after an unload is asked once more, then trusted.
  reg.forget_constant_text();
  region(trusted);
  CHECK(g_read_only_asked == asked + 2);
  std::strcpy(trusted, "step");
  region(trusted);
  CHECK(count_of("backward") == 4);
  CHECK(g_read_only_asked == asked + 2);
  // A thread that starts after the unload trusts read-only text as well.
  std::thread([&] {
    ThreadState* other = reg.thread_state();
    std::strcpy(trusted, "data");
    reg.push(other, trusted, kCategoryAuto, 0);
    reg.pop(other, 1);
    std::strcpy(trusted, "forward");
    reg.push(other, trusted, kCategoryAuto, 0);
    reg.pop(other, 1);
  }).join();
  CHECK(count_of("data") == 2);
  g_read_only = nullptr;
}

TEST_CASE("a reused buffer is compared word by word: texts that differ past a word are told apart",
          "[region]") {
  // The pointer cache compares the buffer with the cached name 8 bytes at a time, the last word
  // masked to the name's own bytes: each text below shares the buffer with the others and
  // differs from some of them only in its length or beyond its first word.
  const char* const texts[] = {"a",         "ab",        "abcdefg",          "abcdefgh",
                               "abcdefghi", "abcdefgh0", "abcdefghijklmno",  "abcdefghijklmnop",
                               "abcdefghijklmnopq",      "abcdefghXjklmnop", "abcdefghijklmnoX"};
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  char buf[64];
  for (int round = 0; round < 3; ++round) {
    for (const char* t : texts) {
      std::strcpy(buf, t);
      reg.push(ts, buf, kCategoryAuto, 0);
      reg.pop(ts, 1);
      // The same text at once again: the pointer cache's own hit.
      reg.push(ts, buf, kCategoryAuto, 0);
      reg.pop(ts, 1);
    }
  }
  const auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == std::size(texts));
  for (const char* t : texts) {
    const RegionRow* r = find_row(rows, t);
    REQUIRE(r);
    CHECK(r->count == 6);
  }
}

TEST_CASE("a name that ends at the end of a mapped page is read without crossing it", "[region]") {
  // The word-at-a-time compare must not read the next page, which is not mapped here: the name's
  // 13 bytes (with the NUL) are two words, 16 bytes from its start.
  const long page = sysconf(_SC_PAGESIZE);
  REQUIRE(page > 0);
  void* map = mmap(nullptr, static_cast<std::size_t>(2 * page), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(map != MAP_FAILED);
  char* base = static_cast<char*>(map);
  REQUIRE(mprotect(base + page, static_cast<std::size_t>(page), PROT_NONE) == 0);
  char* name = base + page - std::strlen("forward_pass") - 1;
  std::strcpy(name, "forward_pass");
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  for (int i = 0; i < 3; ++i) {
    reg.push(ts, name, kCategoryAuto, 0);
    reg.pop(ts, 2);
  }
  const auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].path == "forward_pass");
  CHECK(rows[0].count == 3);
  munmap(map, static_cast<std::size_t>(2 * page));
}

TEST_CASE("unbalanced pops are counted and do not disturb open regions", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  reg.pop(ts, 0);
  reg.pop(ts, 1);
  reg.push(ts, "forward", kCategoryAuto, 10);
  reg.pop(ts, 30);
  reg.pop(ts, 31);
  CHECK(reg.unbalanced_pops() == 3);
  const auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].cpu_ns == 20);
}

TEST_CASE("nesting deeper than the fixed stack is counted and stays balanced", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  const NameId n = reg.register_name("r", kCategoryAuto);
  const int deep = ThreadState::kMaxDepth + 5;
  for (int i = 0; i < deep; ++i) reg.push_id(ts, n, 0);
  for (int i = 0; i < deep; ++i) reg.pop(ts, 1);
  CHECK(reg.depth_overflows() == 5);
  CHECK(reg.unbalanced_pops() == 0);
  CHECK(ts->depth() == 0);
  CHECK(reg.snapshot_rows().size() == static_cast<std::size_t>(ThreadState::kMaxDepth));
}

TEST_CASE("open regions are counted as entered; CPU time appears when they close", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  reg.push(ts, "forward", kCategoryAuto, 0);
  auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].count == 1);
  CHECK(rows[0].cpu_ns == 0);
  CHECK(rows[0].cpu_min_ns == 0);
  CHECK(rows[0].cpu_max_ns == 0);
  reg.pop(ts, 7);
  rows = reg.snapshot_rows();
  CHECK(rows[0].cpu_ns == 7);
  CHECK(rows[0].cpu_min_ns == 7);
  CHECK(rows[0].cpu_max_ns == 7);
  // A region of no measurable length is a minimum of 0, not "never closed".
  reg.push(ts, "forward", kCategoryAuto, 9);
  reg.pop(ts, 9);
  rows = reg.snapshot_rows();
  CHECK(rows[0].count == 2);
  CHECK(rows[0].cpu_min_ns == 0);
  CHECK(rows[0].cpu_max_ns == 7);
}

TEST_CASE("a region is counted once, whether it is open, popped or closed below another",
          "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  auto count_of = [&reg](const std::string& path) -> uint64_t {
    const auto rows = reg.snapshot_rows();
    const RegionRow* r = find_row(rows, path);
    return r ? r->count : 0;
  };
  reg.push(ts, "step", kCategoryAuto, 0);
  reg.push(ts, "forward", kCategoryAuto, 1);
  const uint64_t forward = ts->current_entry();
  reg.push(ts, "layer", kCategoryAuto, 2);
  // Three levels open: each counted from the stack.
  CHECK(count_of("step") == 1);
  CHECK(count_of("step/forward") == 1);
  CHECK(count_of("step/forward/layer") == 1);
  // Closed below the region above it (NVTX domains interleave): counted by the close, and the
  // frame that moved down in its place is still counted once.
  reg.close_entry(ts, forward, 5);
  CHECK(count_of("step/forward") == 1);
  CHECK(count_of("step/forward/layer") == 1);
  reg.pop(ts, 6);  // layer
  CHECK(count_of("step/forward/layer") == 1);
  CHECK(count_of("step") == 1);
  // Entered again under the still-open step: two entries, one open.
  reg.push(ts, "forward", kCategoryAuto, 7);
  CHECK(count_of("step/forward") == 2);
  reg.pop(ts, 8);
  CHECK(count_of("step/forward") == 2);
  reg.pop(ts, 9);  // step
  CHECK(count_of("step") == 1);
  CHECK(reg.unbalanced_pops() == 0);
}

TEST_CASE("data of several threads is summed, including threads that exited", "[region]") {
  RegionRegistry reg;
  const NameId n = reg.register_name("data_load", kCategoryAuto);
  auto work = [&](uint64_t dur) {
    ThreadState* ts = reg.thread_state();
    for (int i = 0; i < 1000; ++i) {
      reg.push_id(ts, n, 0);
      reg.pop(ts, dur);
    }
  };
  std::thread a(work, 3), b(work, 5);
  // Snapshots race with the writers: they must be safe, and they see no more than was written.
  for (int i = 0; i < 20; ++i) {
    auto rows = reg.snapshot_rows();
    if (!rows.empty()) CHECK(rows[0].count <= 2000);
  }
  a.join();
  b.join();
  const auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].count == 2000);
  CHECK(rows[0].cpu_ns == 8000);
  CHECK(rows[0].cpu_min_ns == 3);
  CHECK(rows[0].cpu_max_ns == 5);
  CHECK(rows[0].category == Category::kIo);
}

TEST_CASE("ranges may end on another thread; unknown ids are counted", "[region]") {
  RegionRegistry reg;
  ThreadState* a = reg.thread_state();
  ThreadState* b = reg.thread_state();
  reg.push(a, "forward", kCategoryAuto, 0);
  const uint64_t id = reg.range_start(a, "prefetch", 100);
  REQUIRE(id != 0);
  reg.range_end(b, id, 350);
  reg.range_end(b, id, 400);  // second end of the same id
  reg.range_end(b, 0, 400);
  reg.range_end(b, 123456, 400);
  reg.pop(a, 500);
  CHECK(reg.unknown_range_ends() == 3);
  const auto rows = reg.snapshot_rows();
  // A range is a top-level path named after it, not nested under the open region.
  const RegionRow* r = find_row(rows, "prefetch");
  REQUIRE(r);
  CHECK(r->count == 1);
  CHECK(r->cpu_ns == 250);
  CHECK(find_row(rows, "forward/prefetch") == nullptr);
}

TEST_CASE("a range whose slot was reused ends as unknown instead of pairing wrongly", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  const uint64_t first = reg.range_start(ts, "old", 0);
  for (std::size_t i = 0; i < RegionRegistry::kRangeSlots; ++i) reg.range_start(ts, "new", 1);
  reg.range_end(ts, first, 10);
  CHECK(reg.unknown_range_ends() == 1);
}

TEST_CASE("launch context: own innermost region, else the step thread's, else none", "[region]") {
  RegionRegistry reg;
  ThreadState* main = reg.thread_state();
  ThreadState* worker = reg.thread_state();

  LaunchContext none = reg.launch_context(nullptr);
  CHECK(none.path == kNoPath);
  CHECK(none.step == 0);
  CHECK(none.entry == 0);

  reg.push(main, "step", kCategoryAuto, 0);
  reg.step(main, 1, 0, 0);  // main becomes the step thread
  reg.push(main, "backward", kCategoryAuto, 2);
  LaunchContext on_main = reg.launch_context(main);
  CHECK(reg.path_string(on_main.path) == "step/backward");
  CHECK(on_main.step == 1);
  CHECK(on_main.entry != 0);

  // An autograd worker with nothing open inherits the step thread's innermost region.
  LaunchContext on_worker = reg.launch_context(worker);
  CHECK(on_worker.path == on_main.path);
  CHECK(on_worker.entry == on_main.entry);
  CHECK(reg.category_of(on_worker.path) == Category::kBackward);

  reg.push(worker, "allreduce_hook", static_cast<int>(Category::kComm), 3);
  LaunchContext own = reg.launch_context(worker);
  CHECK(reg.path_string(own.path) == "allreduce_hook");
  CHECK(reg.category_of(own.path) == Category::kComm);
  CHECK(own.entry != on_main.entry);

  reg.pop(worker, 4);
  reg.pop(main, 5);
  reg.pop(main, 6);
  CHECK(reg.launch_context(worker).path == kNoPath);
}

TEST_CASE("launch context: the category of its path, resolved at launch through the thread's memo",
          "[region]") {
  RegionRegistry reg;
  ThreadState* main = reg.thread_state();
  ThreadState* worker = reg.thread_state();
  // One memo for every call, as the launching thread keeps one: each answer must be the path's
  // own, not the previous launch's.
  RegionRegistry::CategoryMemo memo;
  LaunchContext ctx;
  reg.launch_context(nullptr, &ctx, &memo);
  CHECK(ctx.path == kNoPath);
  CHECK(ctx.category == Category::kOther);  // category_of(kNoPath): the record is unattributed

  reg.push(main, "step", kCategoryAuto, 0);
  reg.step(main, 1, 0, 0);
  reg.push(main, "optimizer_step", static_cast<int>(Category::kOptimizer), 1);
  reg.launch_context(main, &ctx, &memo);
  CHECK(ctx.category == Category::kOptimizer);
  // A worker with nothing open takes the step thread's region, and so its category.
  reg.launch_context(worker, &ctx, &memo);
  CHECK(reg.path_string(ctx.path) == "step/optimizer_step");
  CHECK(ctx.category == Category::kOptimizer);

  reg.push(worker, "loader", static_cast<int>(Category::kIo), 2);
  reg.launch_context(worker, &ctx, &memo);
  CHECK(ctx.category == Category::kIo);
  reg.launch_context(main, &ctx, &memo);  // back to a path the memo held before
  CHECK(ctx.category == Category::kOptimizer);
  reg.pop(worker, 3);
  reg.pop(main, 4);
  reg.launch_context(worker, &ctx, &memo);  // the step region: "step" takes its parent's (none)
  CHECK(reg.path_string(ctx.path) == "step");
  CHECK(ctx.category == reg.category_of(ctx.path));
  reg.pop(main, 5);
  reg.launch_context(worker, &ctx, &memo);
  CHECK(ctx.path == kNoPath);
  CHECK(ctx.category == Category::kOther);
  // The convenience form answers the same.
  reg.push(main, "forward", kCategoryAuto, 6);
  CHECK(reg.launch_context(main).category == Category::kForward);
}

TEST_CASE("each region entry gets a distinct serial, across threads too", "[region]") {
  RegionRegistry reg;
  ThreadState* a = reg.thread_state();
  ThreadState* b = reg.thread_state();
  const NameId n = reg.register_name("forward", kCategoryAuto);
  reg.push_id(a, n, 0);
  const uint64_t e1 = reg.launch_context(a).entry;
  reg.pop(a, 1);
  reg.push_id(a, n, 2);
  const uint64_t e2 = reg.launch_context(a).entry;
  reg.push_id(b, n, 2);
  const uint64_t e3 = reg.launch_context(b).entry;
  CHECK(e1 != e2);
  CHECK(e2 != e3);
  CHECK(e1 != e3);
}

TEST_CASE("category_of and path_string of unknown ids are safe", "[region]") {
  RegionRegistry reg;
  CHECK(reg.category_of(kNoPath) == Category::kOther);
  CHECK(reg.category_of(12345) == Category::kOther);
  CHECK(reg.path_string(12345).empty());
}

TEST_CASE("many distinct paths on one thread grow the per-thread lookup table", "[region]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "layer" + std::to_string(i);
    reg.push(ts, name.c_str(), kCategoryAuto, 0);
    reg.pop(ts, static_cast<uint64_t>(i));
  }
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "layer" + std::to_string(i);
    reg.push(ts, name.c_str(), kCategoryAuto, 0);
    reg.pop(ts, 1);
  }
  const auto rows = reg.snapshot_rows();
  REQUIRE(rows.size() == 3000);
  CHECK(reg.path_count() == 3000);
  const RegionRow* r = find_row(rows, "layer2999");
  REQUIRE(r);
  CHECK(r->count == 2);
  CHECK(r->cpu_ns == 3000);
}

TEST_CASE("one rule for step: a region named step ends a step when it closes, whatever API opened it",
          "[region][step]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  const NameId step = reg.register_name("step", kCategoryAuto);
  const NameId fwd = reg.register_name("forward", kCategoryAuto);
  // Push/pop (tt_push, traintime.region, NVTX push/pop).
  for (uint64_t i = 0; i < 3; ++i) {
    reg.push_id(ts, step, 100 * i);
    reg.push_id(ts, fwd, 100 * i + 10);
    reg.pop(ts, 100 * i + 20);
    CHECK(reg.steps().count() == i);  // the inner region ends nothing
    reg.pop(ts, 100 * i + 50);
    CHECK(reg.steps().count() == i + 1);
  }
  // A name in any case, by pointer (tt_push("Step")).
  reg.push(ts, "Step", kCategoryAuto, 400);
  reg.pop(ts, 450);
  CHECK(reg.steps().count() == 4);
  // Start/end ranges (NVTX start/end, tt_range_start) may end on another thread.
  ThreadState* other = reg.thread_state();
  const uint64_t r = reg.range_start(ts, "step", 500);
  reg.range_end(other, r, 550);
  CHECK(reg.steps().count() == 5);
  // Closed below another domain's range.
  reg.push_id(ts, step, 600);
  const uint64_t entry = ts->current_entry();
  reg.push_id(ts, fwd, 610);
  reg.close_entry(ts, entry, 620);
  CHECK(reg.steps().count() == 6);
  reg.pop(ts, 630);
  CHECK(reg.steps().count() == 6);
}

TEST_CASE("readings are ticks: rows are made nanoseconds by the timebase, a step ends at its clock",
          "[region][step]") {
  RegionRegistry reg(CategoryRules::defaults(), /*warmup_steps=*/0);
  Timebase tb;
  tb.duration_ns = [](uint64_t ticks) { return ticks * 5 / 2; };  // 0.4 ns a tick
  tb.now_ns = [] { return uint64_t{1'700}; };
  reg.set_timebase(tb);
  reg.steps().set_origin(1'000);
  ThreadState* ts = reg.thread_state();
  const NameId step = reg.register_name("step", kCategoryAuto);
  const NameId fwd = reg.register_name("forward", kCategoryAuto);
  reg.push_id(ts, step, 10);
  reg.push_id(ts, fwd, 20);
  reg.pop(ts, 24);  // 4 ticks: 10 ns
  reg.push_id(ts, fwd, 30);
  reg.pop(ts, 42);  // 12 ticks: 30 ns
  reg.pop(ts, 50);  // the step region: 40 ticks, and it ends step 0 at the clock's 1700 ns
  const auto rows = reg.snapshot_rows();
  const RegionRow* f = find_row(rows, "step/forward");
  REQUIRE(f);
  CHECK(f->cpu_ns == 40);
  CHECK(f->cpu_min_ns == 10);
  CHECK(f->cpu_max_ns == 30);
  REQUIRE(find_row(rows, "step"));
  CHECK(find_row(rows, "step")->cpu_ns == 100);
  REQUIRE(reg.steps().count() == 1);
  const Steps steps = reg.steps().summary();
  CHECK(steps.wall_ns.total_ns == 700);  // from the origin to the clock's reading, not to tick 50
}

TEST_CASE("a step region with tt_step called inside it counts the step once", "[region][step]") {
  RegionRegistry reg;
  ThreadState* ts = reg.thread_state();
  const NameId step = reg.register_name("step", kCategoryAuto);
  for (uint64_t i = 0; i < 3; ++i) {
    reg.push_id(ts, step, 100 * i);
    reg.step(ts, 100 * i + 40, 8, 0);  // the training loop also calls tt_step
    reg.pop(ts, 100 * i + 50);
  }
  CHECK(reg.steps().count() == 3);
  const uint64_t r = reg.range_start(ts, "step", 400);
  reg.step(ts, 420, 8, 0);
  reg.range_end(ts, r, 430);
  CHECK(reg.steps().count() == 4);
}
