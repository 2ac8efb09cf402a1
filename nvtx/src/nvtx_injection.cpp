// NVTX ranges become traintime regions (DESIGN §3): PyTorch's, Megatron's, the nvtx Python
// package's and the application's. The preload points NVTX_INJECTION64_PATH at libtraintime.so;
// every module that carries NVTX v3 (libtorch, NCCL, the nvtx Python package, ...) then calls
// InitializeInjectionNvtx2 once on its first NVTX call, and we write our handlers into that
// module's function tables. This needs no CUPTI: NVTX injection is independent of the CUPTI
// subscription (and of NVTX's CUPTI route, which would require one).
//
// Domains: nvtxDomainCreateA/W hand out our own Domain objects; calls without a domain belong to
// the domain spelt `default`. TRAINTIME_NVTX_DOMAINS (core::NvtxDomainFilter) says which are
// recorded; by default every one but NCCL's, whose ranges wrap the very calls the NCCL
// interposer measures. Ranges of an unrecorded domain still nest and return NVTX's levels, but
// open no region.
//
// Nesting: on each thread, push/pop ranges of every recorded domain nest into one region path
// in the order they opened (they share the thread's region stack with tt_push). A pop in domain
// D closes D's innermost open range, even when another domain opened a range after it; the
// ranges above it stay open with their paths. Start/end ranges may end on another thread like
// tt_range_start/tt_range_end.
//
// Steps: a range named "step" (any case) ends a step when it closes, as a region named "step"
// does through every API (core::RegionRegistry's one rule): NVTX-only programs (one "step"
// range per iteration) get their steps that way.
//
// Names: ASCII messages as given; registered strings (nvtxDomainRegisterStringA, which NCCL and
// the Python package use) through handles that point at our own copy of the string; wide
// strings narrowed (non-ASCII characters become '?'). Names that carry per-call numbers
// (PyTorch's "aten::mm, seq = 812, op_id = 9, ...") are folded to one region
// (core::fold_nvtx_name). Attributes other than the message (color, NVTX category, payload) are
// ignored. A name seen before costs no lock, whatever buffer it arrives in (the registry's
// per-thread caches).
// NVTX_NO_IMPL: declarations and the tool-side types (nvtxTypes.h), not NVTX's own dispatch.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cerrno>
#include <cwchar>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "traintime/core/module.h"
#include "traintime/nvtx/nvtx_format.h"
#include "traintime/core/nvtx_domains.h"
#include "traintime/core/self_cost.h"
#include "traintime/nvtx/nvtx_injection.h"

static_assert(std::is_same_v<traintime::nvtx::GetExportTable, NvtxGetExportTableFunc_t>,
              "nvtx_injection.h spells NVTX's export-table getter type");

namespace traintime::nvtx {
namespace {

Regions g_regions;  // set once before any handler is installed
core::NvtxDomainFilter* g_filter = nullptr;

// A domain as its handle points at it. Created on nvtxDomainCreate, never destroyed (NVTX
// handles may be used until exit; nvtxDomainDestroy only says the caller is done).
struct Domain {
  std::string name;
  bool recorded = true;
};
Domain g_default{std::string(core::NvtxDomainFilter::kDefaultDomain), true};
std::mutex g_domains_mu;
std::unordered_map<std::string, Domain*>& domains() {
  static auto* d = new std::unordered_map<std::string, Domain*>();  // leaked: used until exit
  return *d;
}

const Domain* domain_of(nvtxDomainHandle_t handle) {
  return handle != nullptr ? reinterpret_cast<const Domain*>(handle) : &g_default;
}

nvtxDomainHandle_t create_domain(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_domains_mu);
  Domain*& d = domains()[name];
  if (d == nullptr) d = new Domain{name, g_filter == nullptr || g_filter->records(name)};
  return reinterpret_cast<nvtxDomainHandle_t>(d);
}

// The push ranges open on this thread, innermost last, of every domain (recorded or not).
struct Open {
  const Domain* domain;
  uint64_t token;  // Regions::open's token; 0 when no region was opened
};
thread_local Open t_open[kMaxOpen];
thread_local int t_depth = 0;
thread_local int t_overflow = 0;  // pushes beyond kMaxOpen, not tracked
std::atomic<uint64_t> g_overflows{0};  // all threads: the section's untracked_ranges
std::atomic<bool> g_injected{false};   // handlers were installed in some module

// Ids handed out for start ranges of unrecorded domains: never a registry id.
constexpr nvtxRangeId_t kUnrecordedRange = nvtxRangeId_t{1} << 63;
std::atomic<nvtxRangeId_t> g_next_unrecorded{0};
// A recorded start range's id is the registry's, with the process image it was started in
// (bits 48-62: 0 in the first, one more in each fork child) so that an end in a fork child of
// a range its parent started is recognised and ignored (the child's registry numbers its own
// ranges from 1 again).
constexpr int kImageShift = 48;
constexpr nvtxRangeId_t kImageMask = (nvtxRangeId_t{1} << 15) - 1;
constexpr nvtxRangeId_t kRegistryIdMask = (nvtxRangeId_t{1} << kImageShift) - 1;
std::atomic<nvtxRangeId_t> g_image{0};

constexpr const char* kUnnamed = "nvtx";
constexpr std::size_t kNameMax = 512;  // a folded name is cut to this (it is the operator name)

// Registered strings live for the process (NVTX handles never expire); few per program. They
// are stored folded, so a registered PyTorch name costs nothing per call.
std::mutex g_strings_mu;
std::unordered_set<std::string>& strings() {
  static auto* s = new std::unordered_set<std::string>();  // leaked: used until exit
  return *s;
}

nvtxStringHandle_t register_string(const std::string& s) {
  char folded[kNameMax];
  const std::string text = core::fold_nvtx_name(s.c_str(), folded, sizeof folded) ? folded : s;
  std::lock_guard<std::mutex> lock(g_strings_mu);
  const std::string& kept = *strings().insert(text).first;  // node-based: the address is stable
  return reinterpret_cast<nvtxStringHandle_t>(const_cast<char*>(kept.c_str()));
}

std::string narrow(const wchar_t* w) {
  std::string out;
  if (!w) return out;
  for (; *w; ++w) out.push_back(*w >= 0 && *w < 0x80 ? static_cast<char>(*w) : '?');
  return out;
}

// The name of an event; `scratch` keeps a narrowed wide string alive for the call.
const char* message_of(const nvtxEventAttributes_t* a, std::string& scratch) {
  if (!a) return kUnnamed;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii && *a->message.ascii ? a->message.ascii : kUnnamed;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered ? reinterpret_cast<const char*>(a->message.registered) : kUnnamed;
    case NVTX_MESSAGE_TYPE_UNICODE:
      scratch = narrow(a->message.unicode);
      return scratch.empty() ? kUnnamed : scratch.c_str();
    default:
      return kUnnamed;
  }
}

// The region name: per-call numbers folded away into `buffer` (thread-local, so the registry's
// pointer cache sees one stable address for every folded name of the thread).
const char* region_name(const char* name) {
  static thread_local char buffer[kNameMax];
  if (name == nullptr || *name == '\0') return kUnnamed;
  return core::fold_nvtx_name(name, buffer, sizeof buffer) ? buffer : name;
}

// NVTX's answer for a push or pop: the 0-based level within the domain.
int level_below(const Domain* d, int end) {
  int level = 0;
  for (int i = 0; i < end; ++i) level += t_open[i].domain == d ? 1 : 0;
  return level;
}

int push(const Domain* d, const char* name) {
  const int saved_errno = errno;
  const int level = level_below(d, t_depth);
  if (t_depth == kMaxOpen) {
    ++t_overflow;
    g_overflows.fetch_add(1, std::memory_order_relaxed);
  } else {
    Open o{d, 0};
    if (d->recorded && g_regions.open) o.token = g_regions.open(region_name(name));
    t_open[t_depth++] = o;
  }
  errno = saved_errno;
  return level;
}

int pop(const Domain* d) {
  const int saved_errno = errno;
  int level = -1;  // NVTX's answer for a pop without a push
  if (t_overflow > 0) {
    --t_overflow;  // beyond kMaxOpen: not tracked, so the level is the tracked depth
    level = level_below(d, t_depth);
  } else {
    int at = t_depth - 1;
    while (at >= 0 && t_open[at].domain != d) --at;
    if (at >= 0) {
      const Open o = t_open[at];
      for (int i = at; i + 1 < t_depth; ++i) t_open[i] = t_open[i + 1];
      --t_depth;
      level = level_below(d, at);
      if (o.token != 0 && g_regions.close) g_regions.close(o.token);
    }
  }
  errno = saved_errno;
  return level;
}

nvtxRangeId_t start(const Domain* d, const char* name) {
  const int saved_errno = errno;
  nvtxRangeId_t id = 0;
  if (!d->recorded || !g_regions.range_start) {
    id = kUnrecordedRange | (g_next_unrecorded.fetch_add(1, std::memory_order_relaxed) + 1);
  } else if (const nvtxRangeId_t r = g_regions.range_start(region_name(name)); r != 0) {
    id = (r & kRegistryIdMask) | (g_image.load(std::memory_order_relaxed) << kImageShift);
  }
  errno = saved_errno;
  return id;
}

void end(nvtxRangeId_t id) {
  if ((id & kUnrecordedRange) != 0 || !g_regions.range_end) return;
  // Started in another process image (the parent of this fork child): not this one's range.
  if (id != 0 && ((id >> kImageShift) & kImageMask) != g_image.load(std::memory_order_relaxed)) return;
  const int saved_errno = errno;
  g_regions.range_end(id & kRegistryIdMask);
  errno = saved_errno;
}

// What the handlers cost (self_cost "NVTX ranges", core/self_cost.h): each push, pop, start and
// end is counted on its thread, and one in kCostEvery is timed in full (the region it records
// included: the preload does not count NVTX's regions as annotations).
thread_local core::ThreadCalls::Counter* t_cost __attribute__((tls_model("initial-exec"))) = nullptr;
core::ThreadCalls g_calls;
core::CostSums g_cost;

template <class F>
auto counted(F f) {
  core::ThreadCalls::Counter* c = t_cost;
  if (__builtin_expect(c == nullptr, 0)) {  // the thread's first call
    const int saved_errno = errno;
    c = t_cost = g_calls.join();
    errno = saved_errno;
  }
  if (__builtin_expect(c == nullptr || !c->count(core::kCostEvery), 1)) return f();
  core::FastClock& clock = core::process_clock();
  const uint64_t t0 = clock.ticks();
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    g_cost.add(clock.ticks() - t0);
  } else {
    const auto r = f();
    g_cost.add(clock.ticks() - t0);
    return r;
  }
}

int NVTX_API RangePushA(const char* message) { return counted([&] { return push(&g_default, message); }); }
int NVTX_API RangePushW(const wchar_t* message) {
  return counted([&] { return push(&g_default, narrow(message).c_str()); });
}
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  return counted([&] {
    std::string scratch;
    return push(&g_default, message_of(a, scratch));
  });
}
int NVTX_API RangePop() { return counted([] { return pop(&g_default); }); }
nvtxRangeId_t NVTX_API RangeStartA(const char* message) {
  return counted([&] { return start(&g_default, message); });
}
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* message) {
  return counted([&] { return start(&g_default, narrow(message).c_str()); });
}
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  return counted([&] {
    std::string scratch;
    return start(&g_default, message_of(a, scratch));
  });
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { counted([&] { end(id); }); }

int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  return counted([&] {
    std::string scratch;
    return push(domain_of(domain), message_of(a, scratch));
  });
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) {
  return counted([&] { return pop(domain_of(domain)); });
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  return counted([&] {
    std::string scratch;
    return start(domain_of(domain), message_of(a, scratch));
  });
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { counted([&] { end(id); }); }
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  const int saved_errno = errno;
  nvtxStringHandle_t h = register_string(s ? s : "");
  errno = saved_errno;
  return h;
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
  const int saved_errno = errno;
  nvtxStringHandle_t h = register_string(narrow(s));
  errno = saved_errno;
  return h;
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  const int saved_errno = errno;
  nvtxDomainHandle_t h = create_domain(name ? name : "");
  errno = saved_errno;
  return h;
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  const int saved_errno = errno;
  nvtxDomainHandle_t h = create_domain(narrow(name));
  errno = saved_errno;
  return h;
}
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}

}  // namespace

int inject(const Regions& regions, std::string_view domains, GetExportTable get_export_table) {
  const int saved_errno = errno;
  static std::once_flag once;
  std::call_once(once, [&] {
    auto* filter = new core::NvtxDomainFilter();
    std::string error;
    if (!domains.empty() && !core::NvtxDomainFilter::parse(domains, filter, &error)) {
      *filter = core::NvtxDomainFilter();  // config validated it: unreachable in the library
    }
    g_filter = filter;
    g_default.recorded = filter->records(core::NvtxDomainFilter::kDefaultDomain);
    g_regions = regions;
  });
  int ok = 0;
  const auto* callbacks = get_export_table
      ? static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS))
      : nullptr;
  if (g_regions.open && callbacks && callbacks->struct_size >= sizeof(NvtxExportTableCallbacks) &&
      callbacks->GetModuleFunctionTable) {
    struct Slot {
      NvtxCallbackModule module;
      unsigned int id;
      NvtxFunctionPointer fn;
    };
    auto fp = [](auto f) { return reinterpret_cast<NvtxFunctionPointer>(f); };
    const Slot slots[] = {
        {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, fp(&RangePushA)},
        {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushW, fp(&RangePushW)},
        {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, fp(&RangePushEx)},
        {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, fp(&RangePop)},
        {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartA, fp(&RangeStartA)},
        {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartW, fp(&RangeStartW)},
        {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartEx, fp(&RangeStartEx)},
        {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeEnd, fp(&RangeEnd)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, fp(&DomainRangePushEx)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, fp(&DomainRangePop)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeStartEx, fp(&DomainRangeStartEx)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeEnd, fp(&DomainRangeEnd)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA, fp(&DomainRegisterStringA)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringW, fp(&DomainRegisterStringW)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, fp(&DomainCreateA)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateW, fp(&DomainCreateW)},
        {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainDestroy, fp(&DomainDestroy)},
    };
    for (NvtxCallbackModule module : {NVTX_CB_MODULE_CORE, NVTX_CB_MODULE_CORE2}) {
      NvtxFunctionTable table = nullptr;
      unsigned int size = 0;
      if (!callbacks->GetModuleFunctionTable(module, &table, &size) || !table) continue;
      for (const Slot& slot : slots)
        if (slot.module == module && slot.id < size && table[slot.id]) *table[slot.id] = slot.fn;
      ok = 1;
    }
  }
  if (ok) g_injected.store(true, std::memory_order_relaxed);
  errno = saved_errno;
  return ok;
}

void on_fork_child() noexcept {
  // The forking thread is the only one left: its thread-locals are the only open ranges there are.
  t_depth = 0;
  t_overflow = 0;
  g_overflows.store(0, std::memory_order_relaxed);
  g_image.store((g_image.load(std::memory_order_relaxed) + 1) & kImageMask, std::memory_order_relaxed);
  g_calls.forget();  // the parent's calls are the parent's
  g_cost.reset();
  t_cost = nullptr;
}

void cost_so_far(core::CostSoFar& c, uint64_t pair_ticks, bool calls) noexcept {
  c.at(core::SampledPath::kNvtx) = g_cost.so_far(pair_ticks);
  if (calls) c.calls_at(core::SampledPath::kNvtx) = g_calls.total();
}

core::Section section() {
  core::Section out("nvtx");
  if (!g_injected.load(std::memory_order_relaxed)) return out;
  out.count(kCounters, Counter::untracked_ranges, g_overflows.load(std::memory_order_relaxed));
  out.cost(core::cost_row("NVTX ranges", g_calls.total(), core::kCostEvery, g_cost));
  return out;
}

// The runtime half the module table registers (core/module.h). Configured by the NVTX library's
// InitializeInjectionNvtx2 (preload/entry_points.cpp); its handlers stay installed in a fork
// child, which forgets the ranges the parent's threads had open.
extern const core::Module kModule;  // listed in the module table (module_table.h)
const core::Module kModule{&kFormat,
                           [](const core::ModuleHost& host) {
                             if (host.fork_child) on_fork_child();
                           },
                           nullptr, nullptr, &section, &cost_so_far};

}  // namespace traintime::nvtx
