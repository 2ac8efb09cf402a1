// The rank-file reader's primitives (core/src/rank_file_json.cpp), shared with each module's own
// section reader (core/module_format.h DataSectionFormat::read): one reader, written once against two
// document types -- nlohmann::json (rank_file_from_json, the records of core/live_record.h, and
// every refusal's message) and a simdjson DOM element (read_rank_file's fast path, SimdValue
// below). Only the primitives differ; the reading of every field is the same template. Every
// accessor names the field by its full path ("regions[3].cpu_ns") in its error.
//
// For the rank file's readers only: it includes simdjson's header (its inline DOM accessors; no
// call into libsimdjson), so a target including it adds simdjson's include directories privately
// (traintime_core, traintime_formats).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "traintime/core/rank_file.h"

namespace traintime::core::json_read {

using nlohmann::json;

// What rank_file_from_json throws for a document outside the contract: what() is the line
// ("rank file: missing field ..."), `detail` the reason alone, for ReadError.
struct SchemaError : std::runtime_error {
  explicit SchemaError(const std::string& reason) : std::runtime_error("rank file: " + reason), detail(reason) {}
  std::string detail;
};

[[noreturn]] inline void fail(const std::string& message) { throw SchemaError(message); }

// A field's place in the document ("steps.detail[3].totals"): a chain of links on the stack,
// spelled out only when an error names it, so reading a valid file builds no path text.
struct Path {
  static constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);
  const Path* parent = nullptr;
  std::string_view key;          // a member name; empty for an array element or the top level
  std::size_t index = kNoIndex;  // an array element's index
  Path() = default;
  Path(const char* top) : key(top) {}  // NOLINT: a top-level member, by name
  Path(const Path* p, std::string_view k, std::size_t i) : parent(p), key(k), index(i) {}
  bool top() const { return parent == nullptr && key.empty() && index == kNoIndex; }
  std::string str() const {
    std::string out = parent ? parent->str() : std::string();
    if (index != kNoIndex) return out + "[" + std::to_string(index) + "]";
    if (!out.empty() && !key.empty()) out += ".";
    return out.append(key);
  }
};

inline Path join(const Path& where, std::string_view key) { return {&where, key, Path::kNoIndex}; }
inline Path indexed(const Path& where, std::size_t i) { return {&where, {}, i}; }
inline std::string name_of(const Path& p) { return p.str(); }

// The writer's one shared rule: a non-finite rate is written as 0, so the file stays valid JSON.
inline double finite(double v) { return std::isfinite(v) ? v : 0.0; }

// ---- the nlohmann::json primitives ----
inline bool is_object(const json& j) { return j.is_object(); }
inline bool is_array(const json& j) { return j.is_array(); }
inline const char* type_name(const json& j) { return j.type_name(); }
inline std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
inline const json* find(const json& obj, std::string_view key) {
  const auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}
inline std::size_t size_of(const json& arr) { return arr.size(); }
template <class F>
void each_element(const json& arr, F&& f) {
  for (std::size_t i = 0; i < arr.size(); ++i) f(i, arr[i]);
}
template <class F>
void each_member(const json& obj, F&& f) {
  for (const auto& [key, value] : obj.items()) f(std::string_view(key), value);
}
inline std::optional<uint64_t> get_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}
inline std::optional<int64_t> get_i64(const json& v) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return static_cast<int64_t>(v.get<uint64_t>());
  return std::nullopt;
}
inline std::optional<double> get_double(const json& v) {
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}
inline std::optional<bool> get_bool(const json& v) {
  if (!v.is_boolean()) return std::nullopt;
  return v.get<bool>();
}
inline bool get_string(const json& v, std::string* out) {
  if (!v.is_string()) return false;
  *out = v.get_ref<const std::string&>();
  return true;
}

// ---- the simdjson DOM primitives ----
// Refusals on this path are never shown: read_rank_file reads a refused file again through
// nlohmann::json, whose messages (type names, values, the byte where parsing stopped) are the
// ones users and tests see.
struct SimdValue {
  simdjson::dom::element e;
};
inline bool is_object(const SimdValue& v) { return v.e.is_object(); }
inline bool is_array(const SimdValue& v) { return v.e.is_array(); }
inline const char* type_name(const SimdValue&) { return "value"; }
inline std::string dump(const SimdValue&) { return {}; }
inline std::optional<SimdValue> find(const SimdValue& obj, std::string_view key) {
  simdjson::dom::element out;
  if (obj.e.get_object().at_key(key).get(out) != simdjson::SUCCESS) return std::nullopt;
  return SimdValue{out};
}
inline std::size_t size_of(const SimdValue& arr) {
  simdjson::dom::array a;
  return arr.e.get_array().get(a) == simdjson::SUCCESS ? a.size() : 0;
}
template <class F>
void each_element(const SimdValue& arr, F&& f) {
  simdjson::dom::array a;
  if (arr.e.get_array().get(a) != simdjson::SUCCESS) return;  // callers checked is_array
  std::size_t i = 0;
  for (simdjson::dom::element el : a) f(i++, SimdValue{el});
}
template <class F>
void each_member(const SimdValue& obj, F&& f) {
  simdjson::dom::object o;
  if (obj.e.get_object().get(o) != simdjson::SUCCESS) return;  // callers checked is_object
  for (simdjson::dom::key_value_pair kv : o) f(kv.key, SimdValue{kv.value});
}
inline std::optional<uint64_t> get_u64(const SimdValue& v) {
  uint64_t x = 0;
  if (v.e.get_uint64().get(x) != simdjson::SUCCESS) return std::nullopt;
  return x;
}
inline std::optional<int64_t> get_i64(const SimdValue& v) {
  int64_t x = 0;
  if (v.e.get_int64().get(x) != simdjson::SUCCESS) return std::nullopt;
  return x;
}
inline std::optional<double> get_double(const SimdValue& v) {
  double x = 0;
  if (v.e.get_double().get(x) != simdjson::SUCCESS) return std::nullopt;
  return x;
}
inline std::optional<bool> get_bool(const SimdValue& v) {
  bool x = false;
  if (v.e.get_bool().get(x) != simdjson::SUCCESS) return std::nullopt;
  return x;
}
inline bool get_string(const SimdValue& v, std::string* out) {
  std::string_view s;
  if (v.e.get_string().get(s) != simdjson::SUCCESS) return false;
  out->assign(s.data(), s.size());
  return true;
}

// ---- the reader, on either ----
template <class J>
void expect_object(const J& j, const Path& where) {
  if (!is_object(j))
    fail(where.top() ? std::string("top level must be an object (got ") + type_name(j) + ")"
                     : "field \"" + where.str() + "\" must be an object (got " + type_name(j) + ")");
}

// A found value: a reference into the nlohmann document, a simdjson element by value.
template <class J>
const J& deref(const J* p) { return *p; }
template <class J>
J deref(const std::optional<J>& p) { return *p; }
// What find returns, for a value in hand.
inline const json* ref_to(const json& v) { return &v; }
inline std::optional<SimdValue> ref_to(const SimdValue& v) { return v; }

template <class J, class N>
[[noreturn]] void wrong_type(const J& v, const N& name, const char* expected) {
  fail("field \"" + name_of(name) + "\" must be " + expected + " (got " + type_name(v) + " " + dump(v) + ")");
}

template <class J, class N>
uint64_t as_u64(const J& v, const N& name) {
  if (const std::optional<uint64_t> x = get_u64(v)) return *x;
  wrong_type(v, name, "an unsigned integer");
}

template <class J, class N>
int64_t as_i64(const J& v, const N& name) {
  if (const std::optional<int64_t> x = get_i64(v)) return *x;
  wrong_type(v, name, "an integer");
}

template <class J, class N>
uint32_t as_u32(const J& v, const N& name) {
  const uint64_t x = as_u64(v, name);
  if (x > std::numeric_limits<uint32_t>::max()) wrong_type(v, name, "an unsigned 32-bit integer");
  return static_cast<uint32_t>(x);
}

template <class J, class N>
double as_double(const J& v, const N& name) {
  if (const std::optional<double> x = get_double(v)) return *x;
  wrong_type(v, name, "a number");
}

template <class J, class N>
bool as_bool(const J& v, const N& name) {
  if (const std::optional<bool> x = get_bool(v)) return *x;
  wrong_type(v, name, "a boolean");
}

template <class J, class N>
std::string as_string(const J& v, const N& name) {
  std::string out;
  if (!get_string(v, &out)) wrong_type(v, name, "a string");
  return out;
}

template <class J>
decltype(auto) need(const J& obj, std::string_view key, const Path& where) {
  const auto v = find(obj, key);
  if (!v) fail("missing field \"" + join(where, key).str() + "\"");
  return deref(v);
}

// Required fields.
template <class J> uint64_t u64(const J& o, std::string_view k, const Path& w) { return as_u64(need(o, k, w), join(w, k)); }
template <class J> uint32_t u32(const J& o, std::string_view k, const Path& w) { return as_u32(need(o, k, w), join(w, k)); }
template <class J> int64_t i64(const J& o, std::string_view k, const Path& w) { return as_i64(need(o, k, w), join(w, k)); }
template <class J> double dbl(const J& o, std::string_view k, const Path& w) { return as_double(need(o, k, w), join(w, k)); }
template <class J> bool boolean(const J& o, std::string_view k, const Path& w) { return as_bool(need(o, k, w), join(w, k)); }
template <class J> std::string str(const J& o, std::string_view k, const Path& w) { return as_string(need(o, k, w), join(w, k)); }

// Optional fields: outside the contract, so files from writers that predate them still read.
template <class J>
uint64_t opt_u64(const J& o, std::string_view k, const Path& w, uint64_t d) {
  const auto v = find(o, k);
  return v ? as_u64(deref(v), join(w, k)) : d;
}
template <class J>
double opt_dbl(const J& o, std::string_view k, const Path& w, double d) {
  const auto v = find(o, k);
  return v ? as_double(deref(v), join(w, k)) : d;
}
template <class J>
bool opt_bool(const J& o, std::string_view k, const Path& w, bool d) {
  const auto v = find(o, k);
  return v ? as_bool(deref(v), join(w, k)) : d;
}
template <class J>
std::string opt_str(const J& o, std::string_view k, const Path& w, std::string d) {
  const auto v = find(o, k);
  return v ? as_string(deref(v), join(w, k)) : d;
}

template <class J>
decltype(auto) need_object(const J& o, std::string_view k, const Path& w) {
  decltype(auto) v = need(o, k, w);
  expect_object(v, join(w, k));
  return v;
}

// Calls f(index, element) for each element of the array o[k].
template <class J, class F>
void each_in_array(const J& o, std::string_view k, const Path& w, F&& f) {
  const auto& v = need(o, k, w);
  if (!is_array(v)) wrong_type(v, join(w, k), "an array");
  each_element(v, f);
}

// The same for an optional array: absent reads as empty.
template <class J, class F>
void each_in_opt_array(const J& o, std::string_view k, const Path& w, F&& f) {
  const auto v = find(o, k);
  if (!v) return;
  if (!is_array(deref(v))) wrong_type(deref(v), join(w, k), "an array");
  each_element(deref(v), f);
}

// The same, reading into `out` (room made for all elements at once).
template <class J, class T, class F>
void each_in_opt_array(const J& o, std::string_view k, const Path& w, std::vector<T>& out, F&& f) {
  const auto v = find(o, k);
  if (!v) return;
  if (!is_array(deref(v))) wrong_type(deref(v), join(w, k), "an array");
  out.reserve(out.size() + size_of(deref(v)));
  each_element(deref(v), f);
}

// The figures steps.detail[].gpu_health[] (core's) shares with the nvml module's
// gpu_health.devices[].run and .steps[]:
// samples, SM clock, power median, temperature, clock-event reasons.
template <class J>
StepHealth shared_health_from(const J& j, const Path& w) {
  expect_object(j, w);
  StepHealth h;
  h.samples = u64(j, "samples", w);
  const Path sw = join(w, "sm_clock_mhz");
  const auto& sm = need_object(j, "sm_clock_mhz", w);
  h.sm_clock_mhz_median = dbl(sm, "median", sw);
  h.sm_clock_mhz_min = u32(sm, "min", sw);
  h.power_w_median = dbl(need_object(j, "power_w", w), "median", join(w, "power_w"));
  h.temperature_c_max = u32(need_object(j, "temperature_c", w), "max", join(w, "temperature_c"));
  const Path rw = join(w, "clock_event_reasons");
  each_in_array(j, "clock_event_reasons", w, [&](std::size_t i, const J& reason) {
    add_clock_event_reason(as_string(reason, indexed(rw, i)), &h.clock_event_reasons);
  });
  return h;
}

}  // namespace traintime::core::json_read
