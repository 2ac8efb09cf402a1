// The null module (null_module.h): the template's counters, its hot path and its section.
#include "traintime/core/module.h"
#include "traintime/null/null_module.h"

#include <atomic>
#include <memory>
#include <cerrno>
#include <string>

#include "traintime/null/null_format.h"

namespace traintime::null {
namespace {

// One relaxed counter per figure: the hot path's only state.
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_first_call_seen{false};
std::atomic<uint64_t> g_calls{0};
std::atomic<uint64_t> g_bytes{0};
std::atomic<uint64_t> g_failed{0};
std::atomic<uint64_t> g_largest{0};  // its data section's one field
Hooks g_hooks;
// The calls open on this thread (begin_call without its end_call yet): 0 outside any.
thread_local uint32_t t_open_calls = 0;

}  // namespace

void configure(bool enabled, const Hooks& hooks) {
  // In a fork child this is the forking thread, the only one left: a call it had open belongs to
  // the parent.
  t_open_calls = 0;
  g_hooks = hooks;
  g_calls.store(0, std::memory_order_relaxed);
  g_bytes.store(0, std::memory_order_relaxed);
  g_failed.store(0, std::memory_order_relaxed);
  g_largest.store(0, std::memory_order_relaxed);
  g_first_call_seen.store(false, std::memory_order_relaxed);
  g_enabled.store(enabled, std::memory_order_release);
}

void note_call(uint64_t bytes, bool ok) noexcept {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  g_calls.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (!ok) g_failed.fetch_add(1, std::memory_order_relaxed);
  // A relaxed maximum: a store only when the call is the largest so far.
  for (uint64_t seen = g_largest.load(std::memory_order_relaxed);
       bytes > seen && !g_largest.compare_exchange_weak(seen, bytes, std::memory_order_relaxed);) {
  }
  // One relaxed load on every later call; the exchange runs the hook once even when two threads
  // make their first calls together.
  if (g_first_call_seen.load(std::memory_order_relaxed)) return;
  if (g_first_call_seen.exchange(true, std::memory_order_relaxed)) return;
  const int saved = errno;
  if (g_hooks.on_first_call) g_hooks.on_first_call();
  errno = saved;
}

bool begin_call() noexcept { return ++t_open_calls == 1; }

void end_call(uint64_t bytes, bool ok) noexcept {
  if (t_open_calls == 0) return;  // none open here: the parent's, in a fork child
  if (--t_open_calls == 0) note_call(bytes, ok);
}

core::Section section() {
  core::Section out("null");
  const uint64_t calls = g_calls.load(std::memory_order_relaxed);
  if (calls == 0) return out;
  out.count(kCounters, Counter::calls, calls);
  out.count(kCounters, Counter::bytes, g_bytes.load(std::memory_order_relaxed));
  // Its warning's text comes from its table (null_format.h), which the report renders too.
  out.count(kCounters, Counter::failed_calls, g_failed.load(std::memory_order_relaxed));
  // Its data section, as its own type: the format (null_format.cpp) writes it.
  auto d = std::make_shared<NullData>();
  d->largest_call_bytes = g_largest.load(std::memory_order_relaxed);
  out.data = std::move(d);
  return out;
}

// The runtime half the module table registers (core/module.h): configured at start-up and in a
// fork child (configure() forgets the open calls), its section written as it is.
extern const core::Module kModule;  // listed in the module table (module_table.h)
const core::Module kModule{
    &kFormat, [](const core::ModuleHost& host) { configure(true, Hooks{host.on_first_record}); }, nullptr,
    nullptr, &section, nullptr};

}  // namespace traintime::null
