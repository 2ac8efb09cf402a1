// SIMULATION tooling: the Kineto trace reader of sim_replay (kineto_trace.h).
#include "kineto_trace.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

#include <simdjson.h>

namespace sim_replay {
namespace {

namespace od = simdjson::ondemand;

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw TraceError(path + ": " + what);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) refuse(path, std::string("cannot be read (") + std::strerror(errno) + ")");
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b)
    return raw;
  // gzip (torch.profiler's `.json.gz`): inflate, noticing a stream that ends early.
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) refuse(path, "cannot start zlib");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  int rc = Z_OK;
  char chunk[1 << 16];
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(chunk, sizeof chunk - z.avail_out);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR || (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0)) {
      inflateEnd(&z);
      refuse(path, "is truncated: its gzip stream ends early (after " + std::to_string(out.size()) +
                       " bytes of JSON)");
    }
    if (rc != Z_OK) {
      const std::string msg = z.msg ? z.msg : "error " + std::to_string(rc);
      inflateEnd(&z);
      refuse(path, "is not a readable gzip file (" + msg + ")");
    }
  }
  inflateEnd(&z);
  return out;
}

std::optional<int64_t> number_ns(od::value v) {
  if (v.type() != od::json_type::number) return std::nullopt;
  return microseconds_to_ns(trim(v.raw_json_token()));
}

std::optional<int64_t> integer(od::value v) {
  if (v.type() != od::json_type::number) return std::nullopt;
  // Kineto writes some counts as floats ("blocks per SM"); ids and sizes are integers.
  int64_t i = 0;
  if (!v.get_int64().get(i)) return i;
  double d = 0;
  if (!v.get_double().get(d)) return static_cast<int64_t>(d);
  return std::nullopt;
}

// A tid or pid: a number, or a string (Kineto's "Spans", "Traces" pseudo threads).
int64_t thread_key(od::value v, std::map<std::string, int64_t>& names) {
  if (v.type() == od::json_type::number) return integer(v).value_or(0);
  std::string_view s;
  if (v.get_string().get(s)) return 0;
  auto [it, fresh] = names.try_emplace(std::string(s), std::numeric_limits<int64_t>::min() + 1 +
                                                          static_cast<int64_t>(names.size()));
  return it->second;
}

std::string string_of(od::value v) {
  std::string_view s;
  if (v.type() == od::json_type::string && !v.get_string().get(s)) return std::string(s);
  if (v.type() == od::json_type::number) return std::string(trim(v.raw_json_token()));
  return {};
}

// "[0, 1, 2]" (PyTorch writes the ranks as a string) or a JSON array.
std::vector<int> rank_list(od::value v) {
  std::vector<int> out;
  if (v.type() == od::json_type::array) {
    for (auto e : v.get_array()) {
      int64_t r = 0;
      if (!e.get_int64().get(r)) out.push_back(static_cast<int>(r));
    }
    return out;
  }
  const std::string s = string_of(v);
  int64_t cur = 0;
  bool in_number = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      cur = cur * 10 + (c - '0');
      in_number = true;
    } else if (in_number) {
      out.push_back(static_cast<int>(cur));
      cur = 0;
      in_number = false;
    }
  }
  if (in_number) out.push_back(static_cast<int>(cur));
  return out;
}

void dim3_of(od::value v, uint32_t out[3]) {
  if (v.type() != od::json_type::array) return;
  int i = 0;
  for (auto e : v.get_array()) {
    int64_t n = 0;
    if (i < 3 && !e.get_int64().get(n) && n > 0) out[i] = static_cast<uint32_t>(n);
    ++i;
  }
}

enum class Category {
  kKernel, kMemcpy, kMemset, kRuntime, kDriver, kUserAnnotation, kGpuUserAnnotation, kCudaSync, kCpu, kOther
};

Category category_of(std::string_view cat) {
  if (iequals(cat, "kernel")) return Category::kKernel;
  if (iequals(cat, "gpu_memcpy") || iequals(cat, "memcpy")) return Category::kMemcpy;
  if (iequals(cat, "gpu_memset") || iequals(cat, "memset")) return Category::kMemset;
  if (iequals(cat, "cuda_runtime") || iequals(cat, "runtime")) return Category::kRuntime;
  if (iequals(cat, "cuda_driver") || iequals(cat, "driver")) return Category::kDriver;
  if (iequals(cat, "user_annotation")) return Category::kUserAnnotation;
  if (iequals(cat, "gpu_user_annotation")) return Category::kGpuUserAnnotation;
  if (iequals(cat, "cuda_sync")) return Category::kCudaSync;
  if (iequals(cat, "cpu_op") || iequals(cat, "operator") || iequals(cat, "python_function") ||
      iequals(cat, "cpu_instant_event") || iequals(cat, "trace") || iequals(cat, "overhead") ||
      iequals(cat, "cuda_profiler_range") || iequals(cat, "python"))
    return Category::kCpu;
  return Category::kOther;
}

// One traceEvents entry, as far as sim_replay needs it.
struct Event {
  std::string ph, cat, name;
  int64_t pid = 0, tid = 0;
  std::optional<int64_t> ts, dur;
  // args
  std::optional<int64_t> correlation, external_id, stream, device, bytes, shared_mem, cbid;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  CollectiveArgs coll;
  bool has_coll = false;
  std::string meta_name;  // M events: args.name
};

void read_args(od::object args, Event& e) {
  for (auto field : args) {
    std::string_view key = field.unescaped_key();
    od::value v = field.value();
    if (key == "correlation") e.correlation = integer(v);
    else if (key == "External id") e.external_id = integer(v);
    else if (key == "stream") e.stream = integer(v);
    else if (key == "device") e.device = integer(v);
    else if (key == "bytes") e.bytes = integer(v);
    else if (key == "shared memory") e.shared_mem = integer(v);
    else if (key == "cbid") e.cbid = integer(v);
    else if (key == "grid") dim3_of(v, e.grid);
    else if (key == "block") dim3_of(v, e.block);
    else if (key == "name") e.meta_name = string_of(v);
    else if (key == "Collective name") e.coll.collective = string_of(v), e.has_coll = true;
    else if (key == "In msg nelems") {
      if (auto n = integer(v); n && *n >= 0) e.coll.in_nelems = static_cast<uint64_t>(*n);
    } else if (key == "Out msg nelems") {
      if (auto n = integer(v); n && *n >= 0) e.coll.out_nelems = static_cast<uint64_t>(*n);
    } else if (key == "Group size") {
      if (auto n = integer(v)) e.coll.group_size = static_cast<int>(*n);
    } else if (key == "dtype") e.coll.dtype = string_of(v);
    else if (key == "Process Group Name") e.coll.pg_name = string_of(v);
    else if (key == "Process Group Ranks") e.coll.pg_ranks = rank_list(v);
  }
}

Event read_event(od::object obj, std::map<std::string, int64_t>& pseudo_threads) {
  Event e;
  for (auto field : obj) {
    std::string_view key = field.unescaped_key();
    od::value v = field.value();
    if (key == "ph") e.ph = string_of(v);
    else if (key == "cat") e.cat = string_of(v);
    else if (key == "name") e.name = string_of(v);
    else if (key == "pid") e.pid = thread_key(v, pseudo_threads);
    else if (key == "tid") e.tid = thread_key(v, pseudo_threads);
    else if (key == "ts") e.ts = number_ns(v);
    else if (key == "dur") e.dur = number_ns(v);
    else if (key == "args" && v.type() == od::json_type::object) read_args(v.get_object(), e);
  }
  return e;
}

// "pt_autograd_0" from Kineto's "thread 2919752 (pt_autograd_0)".
std::string thread_label(const std::string& meta) {
  const size_t open = meta.rfind('('), close = meta.rfind(')');
  if (open != std::string::npos && close != std::string::npos && close > open + 1)
    return meta.substr(open + 1, close - open - 1);
  return meta;
}

void add_event(Trace& t, Event&& e) {
  if (e.ph == "M") {
    ++t.unplayed.metadata;
    if (e.name == "thread_name" && !e.meta_name.empty()) t.thread_names[e.tid] = thread_label(e.meta_name);
    return;
  }
  if (e.ph == "s" || e.ph == "f" || e.ph == "t") {
    ++t.unplayed.flows;
    return;
  }
  if (e.ph == "i" || e.ph == "I") {
    ++t.unplayed.instants;
    return;
  }
  const Category cat = category_of(e.cat);
  if (e.ph != "X" || !e.ts) {
    ++t.unplayed.other;
    return;
  }
  const int64_t dur = std::max<int64_t>(e.dur.value_or(0), 0);
  switch (cat) {
    case Category::kKernel:
    case Category::kMemcpy:
    case Category::kMemset: {
      if (!e.correlation) {
        ++t.unplayed.other;
        return;
      }
      GpuActivity a;
      a.kind = cat == Category::kKernel ? GpuKind::kKernel : cat == Category::kMemcpy ? GpuKind::kMemcpy : GpuKind::kMemset;
      a.name = std::move(e.name);
      a.start_ns = *e.ts;
      a.dur_ns = dur;
      a.stream = static_cast<uint32_t>(e.stream.value_or(e.tid));
      a.device = static_cast<int>(e.device.value_or(e.pid));
      a.correlation = static_cast<uint64_t>(*e.correlation);
      a.external_id = e.external_id;
      a.bytes = static_cast<uint64_t>(std::max<int64_t>(e.bytes.value_or(0), 0));
      std::copy(e.grid, e.grid + 3, a.grid);
      std::copy(e.block, e.block + 3, a.block);
      a.shared_mem = static_cast<uint32_t>(std::max<int64_t>(e.shared_mem.value_or(0), 0));
      if (a.kind == GpuKind::kMemcpy) parse_memcpy_name(a.name, &a.copy_kind, &a.src, &a.dst);
      if (a.kind == GpuKind::kMemset) a.dst = MemoryKind::kDevice;
      if (e.has_coll) a.collective = std::move(e.coll);
      t.activities.push_back(std::move(a));
      return;
    }
    case Category::kRuntime:
    case Category::kDriver: {
      if (e.name == "INVALID") ++t.unplayed.invalid_calls;  // played when GPU work says it launched some
      ApiCall c;
      c.name = std::move(e.name);
      c.driver = cat == Category::kDriver;
      c.ts_ns = *e.ts;
      c.dur_ns = dur;
      c.pid = e.pid;
      c.tid = e.tid;
      c.correlation = static_cast<uint64_t>(e.correlation.value_or(0));
      c.external_id = e.external_id;
      if (e.cbid && *e.cbid >= 0) c.cbid = static_cast<uint32_t>(*e.cbid);
      t.calls.push_back(std::move(c));
      return;
    }
    case Category::kUserAnnotation:
      if (e.has_coll && e.external_id) t.collective_by_external_id[*e.external_id] = std::move(e.coll);
      t.annotations.push_back({std::move(e.name), *e.ts, dur, e.pid, e.tid});
      return;
    case Category::kGpuUserAnnotation:
      ++t.unplayed.gpu_annotations;
      return;
    case Category::kCudaSync:
      // Kineto >= 2.4: a synchronisation's own event names its stream; joined to its call below.
      if (e.correlation && e.stream) {
        ApiCall marker;
        marker.name = "\x01sync";
        marker.correlation = static_cast<uint64_t>(*e.correlation);
        marker.sync_stream = static_cast<uint32_t>(*e.stream);
        t.calls.push_back(std::move(marker));
      } else {
        ++t.unplayed.other;
      }
      return;
    case Category::kCpu:
      if (e.has_coll && e.external_id) t.collective_by_external_id[*e.external_id] = std::move(e.coll);
      ++t.unplayed.cpu_ops;
      return;
    case Category::kOther:
      ++t.unplayed.other;
      return;
  }
}

void read_distributed_info(od::object obj, Trace& t) {
  for (auto field : obj) {
    std::string_view key = field.unescaped_key();
    od::value v = field.value();
    if (key == "rank") {
      if (auto n = integer(v)) t.rank = static_cast<int>(*n);
    } else if (key == "world_size") {
      if (auto n = integer(v)) t.world_size = static_cast<int>(*n);
    } else if (key == "pg_config" && v.type() == od::json_type::array) {
      for (auto pgv : v.get_array()) {
        od::object pg;
        if (pgv.get_object().get(pg)) continue;
        ProcessGroup g;
        for (auto f : pg) {
          std::string_view k = f.unescaped_key();
          od::value x = f.value();
          if (k == "pg_name") g.name = string_of(x);
          else if (k == "pg_size") g.size = static_cast<int>(integer(x).value_or(0));
          else if (k == "ranks") g.ranks = rank_list(x);
        }
        t.process_groups.push_back(std::move(g));
      }
    }
  }
}

void read_device_properties(od::array arr, Trace& t) {
  for (auto dv : arr) {
    od::object d;
    if (dv.get_object().get(d)) continue;
    std::optional<int64_t> id;
    std::string name;
    for (auto f : d) {
      std::string_view k = f.unescaped_key();
      if (k == "id") id = integer(f.value());
      else if (k == "name") name = string_of(f.value());
    }
    if (id) t.device_names[static_cast<int>(*id)] = name;
  }
}

// Joins each cuda_sync event's stream to its runtime call (same correlation id).
void join_sync_streams(Trace& t) {
  std::map<uint64_t, uint32_t> stream_of;
  auto is_marker = [](const ApiCall& c) { return c.name == "\x01sync"; };
  for (const ApiCall& c : t.calls)
    if (is_marker(c)) stream_of[c.correlation] = *c.sync_stream;
  t.calls.erase(std::remove_if(t.calls.begin(), t.calls.end(), is_marker), t.calls.end());
  for (ApiCall& c : t.calls) {
    auto it = stream_of.find(c.correlation);
    if (it != stream_of.end()) c.sync_stream = it->second;
  }
}

}  // namespace

std::optional<int64_t> microseconds_to_ns(std::string_view tok) {
  tok = trim(tok);
  if (tok.empty()) return std::nullopt;
  bool negative = false;
  if (tok.front() == '-') {
    negative = true;
    tok.remove_prefix(1);
  }
  if (tok.find_first_of("eE") != std::string_view::npos) {
    // Not what Kineto writes; a double is as good as the text then.
    char* end = nullptr;
    const std::string s(tok);
    const double us = std::strtod(s.c_str(), &end);
    if (end == s.c_str()) return std::nullopt;
    const double ns = us * 1000.0 + 0.5;
    return negative ? -static_cast<int64_t>(ns) : static_cast<int64_t>(ns);
  }
  int64_t whole = 0, frac = 0;
  int frac_digits = 0;
  bool round_up = false, seen_dot = false, any = false;
  for (char c : tok) {
    if (c == '.') {
      if (seen_dot) return std::nullopt;
      seen_dot = true;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    any = true;
    if (!seen_dot) {
      if (whole > (int64_t{1} << 52)) return std::nullopt;
      whole = whole * 10 + (c - '0');
    } else if (frac_digits < 3) {
      frac = frac * 10 + (c - '0');
      ++frac_digits;
    } else if (frac_digits == 3) {
      round_up = c >= '5';
      ++frac_digits;
    }
  }
  if (!any) return std::nullopt;
  for (; frac_digits < 3; ++frac_digits) frac *= 10;
  const int64_t ns = whole * 1000 + frac + (round_up ? 1 : 0);
  return negative ? -ns : ns;
}

void parse_memcpy_name(std::string_view name, CopyKind* kind, MemoryKind* src, MemoryKind* dst) {
  *kind = CopyKind::kUnknown;
  *src = *dst = MemoryKind::kUnknown;
  static const std::pair<const char*, CopyKind> kinds[] = {
      {"HtoD", CopyKind::kHtoD}, {"DtoH", CopyKind::kDtoH}, {"DtoD", CopyKind::kDtoD},
      {"HtoH", CopyKind::kHtoH}, {"PtoP", CopyKind::kPtoP}};
  for (const auto& [text, k] : kinds)
    if (name.find(text) != std::string_view::npos) *kind = k;
  auto memory = [](std::string_view s) {
    s = trim(s);
    if (iequals(s, "Pageable")) return MemoryKind::kPageable;
    if (iequals(s, "Pinned")) return MemoryKind::kPinned;
    if (iequals(s, "Device")) return MemoryKind::kDevice;
    if (iequals(s, "Managed")) return MemoryKind::kManaged;
    return MemoryKind::kUnknown;
  };
  const size_t open = name.find('('), arrow = name.find("->"), close = name.rfind(')');
  if (open != std::string_view::npos && arrow != std::string_view::npos && close != std::string_view::npos &&
      open < arrow && arrow < close) {
    *src = memory(name.substr(open + 1, arrow - open - 1));
    *dst = memory(name.substr(arrow + 2, close - arrow - 2));
  }
  // Kinds the name leaves open follow from the direction.
  auto side = [](char c) { return c == 'H' ? MemoryKind::kPageable : MemoryKind::kDevice; };
  if (*kind != CopyKind::kUnknown && *kind != CopyKind::kPtoP) {
    const char* text = copy_kind_name(*kind);
    if (*src == MemoryKind::kUnknown) *src = side(text[0]);
    if (*dst == MemoryKind::kUnknown) *dst = side(text[3]);
  }
}

const char* copy_kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::kHtoD: return "HtoD";
    case CopyKind::kDtoH: return "DtoH";
    case CopyKind::kDtoD: return "DtoD";
    case CopyKind::kHtoH: return "HtoH";
    case CopyKind::kPtoP: return "PtoP";
    default: return "unknown";
  }
}

Trace parse_kineto_trace(std::string text, const std::string& path) {
  Trace t;
  t.path = path;
  bool have_events = false;
  std::map<std::string, int64_t> pseudo_threads;
  try {
    simdjson::padded_string json(text);
    text.clear();
    od::parser parser;
    od::document doc = parser.iterate(json);
    od::object root;
    if (doc.get_object().get(root)) {
      const std::string_view start = trim(std::string_view(json.data(), std::min<size_t>(json.size(), 64)));
      const bool json_value = (!start.empty() && std::strchr("[\"-0123456789", start.front()) != nullptr) ||
                              start == "true" || start == "false" || start == "null";
      refuse(path, json_value ? "is not a Kineto trace: its JSON is not an object" : "is not valid JSON");
    }
    for (auto field : root) {
      std::string_view key = field.unescaped_key();
      od::value v = field.value();
      if (key == "traceEvents") {
        od::array events;
        if (v.get_array().get(events)) refuse(path, "is not a Kineto trace: its traceEvents is not an array");
        have_events = true;
        for (auto ev : events) {
          od::object obj;
          if (ev.get_object().get(obj)) {
            ++t.unplayed.other;
            continue;
          }
          add_event(t, read_event(obj, pseudo_threads));
        }
      } else if (key == "distributedInfo" && v.type() == od::json_type::object) {
        read_distributed_info(v.get_object(), t);
      } else if (key == "deviceProperties" && v.type() == od::json_type::array) {
        read_device_properties(v.get_array(), t);
      }
    }
  } catch (const simdjson::simdjson_error& e) {
    const bool early = e.error() == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || e.error() == simdjson::UNCLOSED_STRING ||
                       e.error() == simdjson::EMPTY || e.error() == simdjson::TAPE_ERROR;
    refuse(path, std::string(early ? "is truncated or malformed JSON (" : "is not valid JSON (") + e.what() + ")");
  }
  if (!have_events) refuse(path, "is not a Kineto trace: it has no traceEvents");
  join_sync_streams(t);
  return t;
}

Trace read_kineto_trace(const std::string& path) { return parse_kineto_trace(read_file(path), path); }

}  // namespace sim_replay
