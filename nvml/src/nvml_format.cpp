// The nvml module's format (nvml_format.h): its warning's text, made only here, and its data
// section, gpu_health (gpu_health.h), written and read only here.
#include "traintime/nvml/nvml_format.h"

#include <memory>

#include "traintime/core/json_read.h"
#include "traintime/nvml/gpu_health.h"

namespace traintime::nvml {

std::string messages::summary_from_last_publish(uint64_t, const core::ModuleCounters& all) {
  return core::last_publish_message("the GPU health figures", all);
}

core::StepHealth step_health(int32_t cuda_device, const HealthFigures& f) {
  core::StepHealth h;
  h.cuda_device = cuda_device;
  h.samples = f.samples;
  h.sm_clock_mhz_median = f.sm_clock_mhz_median;
  h.sm_clock_mhz_min = f.sm_clock_mhz_min;
  h.power_w_median = f.power_w_median;
  h.temperature_c_max = f.temperature_c_max;
  h.clock_event_reasons = f.clock_event_reasons;
  return h;
}


void hand_up(std::shared_ptr<const GpuHealth> health, core::HealthSummary* out) {
  out->steps.clear();
  for (const HealthDevice& d : health->devices)
    for (const HealthDevice::Step& st : d.steps) out->steps.push_back({st.index, step_health(d.cuda_device, st.figures)});
  out->section.data = std::move(health);
}

const GpuHealth* gpu_health(const core::HealthSummary& s) {
  return static_cast<const GpuHealth*>(s.section.data.get());  // only hand_up sets it
}

const GpuHealth* gpu_health(const core::RankFile& f) {
  const auto it = f.module_data.find(std::string(kFormat.name));
  // Only this module's reader and its summary() put data under its name.
  return it == f.module_data.end() ? nullptr : static_cast<const GpuHealth*>(it->second.get());
}

namespace {

using namespace core::json_read;

// ---- writing ----
json health_figures_json(const HealthFigures& h) {
  return {{"samples", h.samples},
          {"sm_clock_mhz", {{"median", finite(h.sm_clock_mhz_median)}, {"min", h.sm_clock_mhz_min}}},
          {"mem_clock_mhz", {{"median", finite(h.mem_clock_mhz_median)}}},
          {"power_w", {{"median", finite(h.power_w_median)}, {"limit", finite(h.power_limit_w)}}},
          {"temperature_c", {{"max", h.temperature_c_max}}},
          {"clock_event_reasons", core::clock_event_reason_names(h.clock_event_reasons)},
          {"pcie", {{"gen", h.pcie_gen_min}, {"width", h.pcie_width_min}}},
          {"memory", {{"used_bytes_max", h.memory_used_bytes_max},
                      {"total_bytes", h.memory_total_bytes}}}};
}

void gpu_health_json(const core::ModuleData& data, json* top) {
  const GpuHealth& g = static_cast<const GpuHealth&>(data);  // the module's own (Section::data)
  json devices = json::array();
  for (const HealthDevice& d : g.devices) {
    json steps = json::array();
    for (const HealthDevice::Step& st : d.steps) {
      json row = health_figures_json(st.figures);
      row["index"] = st.index;
      steps.push_back(std::move(row));
    }
    devices.push_back({{"cuda_device", d.cuda_device},
                       {"pci_bus_id", d.pci_bus_id},
                       {"mig", d.mig},
                       {"run", health_figures_json(d.run)},
                       {"steps", std::move(steps)}});
  }
  (*top)["gpu_health"] = {{"status", g.status}, {"interval_ms", g.interval_ms}, {"devices", std::move(devices)}};
}

// ---- reading (core/json_read.h: the same template for both documents) ----
// gpu_health.devices[].run and .steps[] (added with the nvml module).
template <class J>
HealthFigures health_figures_from(const J& j, const Path& w) {
  const core::StepHealth shared = shared_health_from(j, w);
  HealthFigures h;
  h.samples = shared.samples;
  h.sm_clock_mhz_median = shared.sm_clock_mhz_median;
  h.sm_clock_mhz_min = shared.sm_clock_mhz_min;
  h.power_w_median = shared.power_w_median;
  h.temperature_c_max = shared.temperature_c_max;
  h.clock_event_reasons = shared.clock_event_reasons;
  h.mem_clock_mhz_median = dbl(need_object(j, "mem_clock_mhz", w), "median", join(w, "mem_clock_mhz"));
  h.power_limit_w = dbl(need_object(j, "power_w", w), "limit", join(w, "power_w"));
  const Path lw = join(w, "pcie");
  const auto& pcie = need_object(j, "pcie", w);
  h.pcie_gen_min = u32(pcie, "gen", lw);
  h.pcie_width_min = u32(pcie, "width", lw);
  const Path mw = join(w, "memory");
  const auto& memory = need_object(j, "memory", w);
  h.memory_used_bytes_max = u64(memory, "used_bytes_max", mw);
  h.memory_total_bytes = u64(memory, "total_bytes", mw);
  return h;
}

// gpu_health: optional (no CUDA in the process, or a file before the nvml module): null.
template <class J>
std::shared_ptr<const core::ModuleData> gpu_health_from(const J& top) {
  const auto found = find(top, "gpu_health");
  if (!found) return nullptr;
  auto out = std::make_shared<GpuHealth>();
  GpuHealth& g = *out;
  const J& j = deref(found);
  const Path w = "gpu_health";
  expect_object(j, w);
  g.status = str(j, "status", w);
  g.interval_ms = u32(j, "interval_ms", w);
  const Path dw = join(w, "devices");
  each_in_array(j, "devices", w, [&](std::size_t i, const J& dj) {
    const Path iw = indexed(dw, i);
    expect_object(dj, iw);
    HealthDevice d;
    d.cuda_device = static_cast<int32_t>(i64(dj, "cuda_device", iw));
    d.pci_bus_id = str(dj, "pci_bus_id", iw);
    d.mig = boolean(dj, "mig", iw);
    d.run = health_figures_from(need(dj, "run", iw), join(iw, "run"));
    const Path stw = join(iw, "steps");
    each_in_array(dj, "steps", iw, [&](std::size_t k, const J& sj) {
      const Path kw = indexed(stw, k);
      HealthDevice::Step st;
      st.figures = health_figures_from(sj, kw);
      st.index = u64(sj, "index", kw);
      d.steps.push_back(std::move(st));
    });
    g.devices.push_back(std::move(d));
  });
  return out;
}


constexpr core::CounterTable kTables[] = {core::counter_table(kCounters)};

}  // namespace

const core::ModuleFormat kFormat{
    "nvml", 1, kTables, 1,
    {"gpu_health", &gpu_health_json, &gpu_health_from<json>, &gpu_health_from<SimdValue>}};

}  // namespace traintime::nvml
