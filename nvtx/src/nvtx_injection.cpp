// NVTX ranges become traintime regions (DESIGN §3): PyTorch's, Megatron's, NCCL's own and the
// application's. The preload points NVTX_INJECTION64_PATH at libtraintime.so; every module that
// carries NVTX v3 (libtorch, NCCL, the nvtx Python package, ...) then calls
// InitializeInjectionNvtx2 once on its first NVTX call, and we write our handlers into that
// module's function table. Push/pop nest per thread like tt_push/tt_pop; start/end ranges may
// end on another thread like tt_range_start/tt_range_end. This needs no CUPTI: NVTX injection is
// independent of the CUPTI subscription (and of NVTX's CUPTI route, which would require one).
//
// Steps: a range named exactly "step" (any case) is a step marker (DESIGN §3): its end counts as
// one tt_step, which is how NVTX-only programs (one "step" range per iteration) get steps.
//
// Names: ASCII messages as given; registered strings (nvtxDomainRegisterStringA, which NCCL and
// the Python package use) through handles that point at our own copy of the string; wide
// strings narrowed (non-ASCII characters become '?'). Attributes other than the message (color,
// NVTX category, payload) are ignored.
// NVTX_NO_IMPL: declarations and the tool-side types (nvtxTypes.h), not NVTX's own dispatch.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cerrno>
#include <cwchar>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_set>

#include "traintime/nvtx/nvtx_injection.h"

static_assert(std::is_same_v<traintime::nvtx::GetExportTable, NvtxGetExportTableFunc_t>,
              "nvtx_injection.h spells NVTX's export-table getter type");

namespace traintime::nvtx {
namespace {

const tt_api_v1* g_api = nullptr;  // set once before any handler is installed
thread_local int t_push_depth = 0;  // what nvtxRangePush/Pop report back: the nesting level

// Which open push ranges of this thread are "step" ranges, for the first kStepDepth levels.
constexpr int kStepDepth = 64;
thread_local bool t_is_step[kStepDepth];

// Start/end ranges named "step": their ids, until they end (rare; a lock is fine there).
std::atomic<int> g_open_step_ranges{0};
std::mutex g_step_ranges_mu;
std::unordered_set<nvtxRangeId_t>& step_ranges() {
  static auto* s = new std::unordered_set<nvtxRangeId_t>();  // leaked: used until exit
  return *s;
}

bool is_step_name(const char* name) {
  return name && (name[0] | 0x20) == 's' && (name[1] | 0x20) == 't' && (name[2] | 0x20) == 'e' &&
         (name[3] | 0x20) == 'p' && name[4] == '\0';
}

constexpr const char* kUnnamed = "nvtx";

// Registered strings live for the process (NVTX handles never expire); few per program.
std::mutex g_strings_mu;
std::unordered_set<std::string>& strings() {
  static auto* s = new std::unordered_set<std::string>();  // leaked: used until exit
  return *s;
}

nvtxStringHandle_t register_string(const std::string& s) {
  std::lock_guard<std::mutex> lock(g_strings_mu);
  const std::string& kept = *strings().insert(s).first;  // node-based: the address is stable
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

int push(const char* name) {
  const int saved_errno = errno;
  g_api->push(name && *name ? name : kUnnamed);
  if (t_push_depth >= 0 && t_push_depth < kStepDepth) t_is_step[t_push_depth] = is_step_name(name);
  errno = saved_errno;
  return t_push_depth++;
}

int pop() {
  const int saved_errno = errno;
  g_api->pop();
  int level = -1;  // NVTX's answer for a pop without a push
  if (t_push_depth > 0) {
    level = --t_push_depth;
    if (level < kStepDepth && t_is_step[level]) g_api->step(0, 0);
  }
  errno = saved_errno;
  return level;
}

nvtxRangeId_t start(const char* name) {
  const int saved_errno = errno;
  const nvtxRangeId_t id = g_api->range_start(name && *name ? name : kUnnamed);
  if (is_step_name(name)) {
    std::lock_guard<std::mutex> lock(g_step_ranges_mu);
    if (step_ranges().insert(id).second) g_open_step_ranges.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved_errno;
  return id;
}

void end(nvtxRangeId_t id) {
  const int saved_errno = errno;
  g_api->range_end(id);
  if (g_open_step_ranges.load(std::memory_order_relaxed) > 0) {
    bool was_step = false;
    {
      std::lock_guard<std::mutex> lock(g_step_ranges_mu);
      was_step = step_ranges().erase(id) > 0;
    }
    if (was_step) {
      g_open_step_ranges.fetch_sub(1, std::memory_order_relaxed);
      g_api->step(0, 0);
    }
  }
  errno = saved_errno;
}

int NVTX_API RangePushA(const char* message) { return push(message); }
int NVTX_API RangePushW(const wchar_t* message) { return push(narrow(message).c_str()); }
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  std::string scratch;
  return push(message_of(a, scratch));
}
int NVTX_API RangePop() { return pop(); }
nvtxRangeId_t NVTX_API RangeStartA(const char* message) { return start(message); }
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* message) { return start(narrow(message).c_str()); }
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  std::string scratch;
  return start(message_of(a, scratch));
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { end(id); }

int NVTX_API DomainRangePushEx(nvtxDomainHandle_t, const nvtxEventAttributes_t* a) {
  std::string scratch;
  return push(message_of(a, scratch));
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t) { return pop(); }
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t, const nvtxEventAttributes_t* a) {
  std::string scratch;
  return start(message_of(a, scratch));
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
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

}  // namespace

int inject(const tt_api_v1* api, GetExportTable get_export_table) {
  const int saved_errno = errno;
  static std::once_flag once;
  std::call_once(once, [api] { g_api = api; });
  int ok = 0;
  const auto* callbacks = get_export_table
      ? static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS))
      : nullptr;
  if (g_api && callbacks && callbacks->struct_size >= sizeof(NvtxExportTableCallbacks) &&
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
  errno = saved_errno;
  return ok;
}

}  // namespace traintime::nvtx
