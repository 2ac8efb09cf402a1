// The nvml module (nvml/): the per-step summarising of samples, exact against hand-made ones, and
// the sampler end to end against simgpu's libnvidia-ml.so.1 (SIMULATED NVML: rank 2's GPU
// throttled to 0.7 by SIMGPU_THROTTLE, set before simgpu first reads it), every expected figure from
// simgpu_health_of(), and the status line when NVML cannot be used.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "simgpu/engine.h"
#include "traintime/core/rank_file_builder.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/nvml/nvml_format.h"
#include "traintime/nvml/nvml_sampler.h"

using namespace traintime;

namespace {

nvml::Sample sample(uint32_t sm, uint32_t power_mw = 500000, uint64_t reasons = 0) {
  nvml::Sample s;
  s.sm_clock_mhz = sm;
  s.mem_clock_mhz = 2619;
  s.power_mw = power_mw;
  s.power_limit_mw = 700000;
  s.temperature_c = sm / 30;
  s.clock_event_reasons = reasons;
  s.pcie_gen = 5;
  s.pcie_width = 16;
  s.memory_used_bytes = sm;
  s.memory_total_bytes = 1000;
  return s;
}

std::atomic<uint32_t> g_step{0};
uint32_t steps_completed() noexcept { return g_step.load(); }

nvml::Options options(const char* library) {
  nvml::Options o;
  o.interval_ms = 10;
  o.step_detail = 4;
  o.library = library;
  return o;
}

nvml::Hooks hooks() {
  nvml::Hooks h;
  h.steps_completed = &steps_completed;
  return h;
}

// Waits (bounded) until the sampler took `n` samples or found no NVML.
core::HealthSummary wait_for_samples(uint64_t n) {
  for (int i = 0; i < 1000; ++i) {
    core::HealthSummary s = nvml::summary();
    const auto& c = s.section.counters.counters;
    const nvml::GpuHealth* h = nvml::gpu_health(s);
    const bool settled = h && h->status.find("not found") != std::string::npos;
    if (settled || (c.count("samples") && c.at("samples") >= n)) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return nvml::summary();
}

// The file written and read back by the report's reader (simdjson's path).
std::optional<core::RankFile> through_the_file(const core::RankFile& built) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nvml-test-" + std::to_string(getpid()) + ".json")).string();
  std::string error;
  if (!core::write_rank_file(path, built, &error)) return std::nullopt;
  std::optional<core::RankFile> back = core::read_rank_file(path, &error);
  std::filesystem::remove(path);
  return back;
}

}  // namespace

TEST_CASE("medians are exact over odd and even counts, minimum and maximum kept", "[nvml]") {
  nvml::HealthAccumulator a;
  for (uint32_t sm : {1980u, 1400u, 1980u}) a.add(sample(sm));
  nvml::HealthFigures f = a.figures();
  CHECK(f.samples == 3);
  CHECK(f.sm_clock_mhz_median == 1980);
  CHECK(f.sm_clock_mhz_min == 1400);
  CHECK(f.temperature_c_max == 66);
  CHECK(f.memory_used_bytes_max == 1980);
  a.add(sample(1400));
  f = a.figures();
  CHECK(f.sm_clock_mhz_median == 1690);  // (1400 + 1980) / 2
  CHECK(f.power_w_median == 500.0);
  CHECK(f.power_limit_w == 700.0);
  CHECK(f.mem_clock_mhz_median == 2619);
}

TEST_CASE("clock-event reasons are the union of the samples', by NVML's names", "[nvml]") {
  nvml::HealthAccumulator a;
  a.add(sample(1980, 500000, 0x1));   // GPU idle
  a.add(sample(1400, 500000, 0x40));  // HW thermal slowdown
  a.add(sample(1400, 500000, 0x4 | (uint64_t{1} << 40)));
  CHECK(a.figures().clock_event_reasons.bits == (0x1 | 0x4 | 0x40 | (uint64_t{1} << 40)));
  CHECK(core::clock_event_reason_names(a.figures().clock_event_reasons) ==
        std::vector<std::string>{"gpu_idle", "sw_power_cap", "hw_thermal_slowdown", "bit_40"});
}

TEST_CASE("the PCIe link's lowest state is kept, an unread one never counts", "[nvml]") {
  nvml::HealthAccumulator a;
  nvml::Sample s = sample(1980);
  a.add(s);
  s.pcie_gen = 3, s.pcie_width = 8;
  a.add(s);
  s.pcie_gen = 0, s.pcie_width = 0;
  a.add(s);
  CHECK(a.figures().pcie_gen_min == 3);
  CHECK(a.figures().pcie_width_min == 8);
}

TEST_CASE("per-step figures keep the last steps that had samples, the run keeps all", "[nvml]") {
  nvml::DeviceHealth d(2);
  d.add(0, sample(1980));
  d.add(1, sample(1500));
  d.add(1, sample(1700));
  d.add(3, sample(1000));
  nvml::HealthDevice out;
  d.fill(&out);
  CHECK(out.run.samples == 4);
  CHECK(out.run.sm_clock_mhz_min == 1000);
  REQUIRE(out.steps.size() == 2);
  CHECK(out.steps[0].index == 1);
  CHECK(out.steps[0].figures.sm_clock_mhz_median == 1600);
  CHECK(out.steps[1].index == 3);
  CHECK(out.steps[1].figures.samples == 1);
}

TEST_CASE("a step's figures are final, for the live metrics, once a later step's sample came", "[nvml][live]") {
  nvml::DeviceHealth d(0);  // no per-step rows kept: the live figures do not depend on them
  uint64_t step = 99;
  core::StepHealth h;
  d.add(3, sample(1500, 400000, 0x1));
  d.add(3, sample(1700, 600000, 0x40));
  CHECK_FALSE(d.last_finished(&step, &h));  // step 3 may still get samples
  d.add(5, sample(1980));
  REQUIRE(d.last_finished(&step, &h));
  CHECK(step == 3);
  CHECK(h.samples == 2);
  CHECK(h.sm_clock_mhz_median == 1600);
  CHECK(h.sm_clock_mhz_min == 1500);
  CHECK(h.power_w_median == 500.0);
  CHECK(h.temperature_c_max == 1700 / 30);
  CHECK(h.clock_event_reasons.bits == (0x1 | 0x40));
  d.add(5, sample(1000));
  REQUIRE(d.last_finished(&step, &h));
  CHECK(step == 3);  // step 5 is still the one in progress
  d.add(6, sample(1980));
  REQUIRE(d.last_finished(&step, &h));
  CHECK(step == 5);
  CHECK(h.sm_clock_mhz_median == 1490);  // (1000 + 1980) / 2
  CHECK(h.clock_event_reasons.empty());
}

TEST_CASE("steps.detail rows get each device's figures of their step, through both readers", "[nvml][schema]") {
  auto g = std::make_shared<nvml::GpuHealth>();
  g->status = "sampled";
  g->interval_ms = 100;
  for (int32_t device : {2, 0}) {
    nvml::DeviceHealth d(8);
    d.add(1, sample(1500, 400000, device == 2 ? 0x40 : 0x1));
    d.add(3, sample(1400 + device));
    d.add(9, sample(1980));  // no detail row of step 9
    nvml::HealthDevice hd;
    hd.cuda_device = device;
    d.fill(&hd);
    g->devices.push_back(std::move(hd));
  }
  core::HealthSummary health;
  nvml::hand_up(g, &health);
  core::CpuSummary cpu;
  for (uint64_t k : {1, 2, 3}) {
    core::Steps::Detail row;
    row.index = k;
    row.wall_ns = 1000 * k;
    cpu.steps.detail.push_back(row);
  }
  const core::RankFile built = core::build_rank_file({}, cpu, {}, {}, {}, health);
  const nlohmann::json j = core::rank_file_to_json(built);
  const nlohmann::json& rows = j.at("steps").at("detail");
  REQUIRE(rows.size() == 3);
  CHECK_FALSE(rows[1].contains("gpu_health"));  // step 2 had no sample
  const nlohmann::json expected_1 = nlohmann::json::parse(R"([
    {"cuda_device": 2, "samples": 1, "sm_clock_mhz": {"median": 1500.0, "min": 1500},
     "power_w": {"median": 400.0}, "temperature_c": {"max": 50},
     "clock_event_reasons": ["hw_thermal_slowdown"]},
    {"cuda_device": 0, "samples": 1, "sm_clock_mhz": {"median": 1500.0, "min": 1500},
     "power_w": {"median": 400.0}, "temperature_c": {"max": 50},
     "clock_event_reasons": ["gpu_idle"]}])");
  CHECK(rows[0].at("gpu_health") == expected_1);
  REQUIRE(rows[2].at("gpu_health").size() == 2);
  CHECK(rows[2]["gpu_health"][0]["sm_clock_mhz"]["median"] == 1402.0);
  CHECK(rows[2]["gpu_health"][1]["sm_clock_mhz"]["median"] == 1400.0);

  const std::optional<core::RankFile> fast = through_the_file(built);
  REQUIRE(fast);
  for (const core::RankFile& back : {core::rank_file_from_json(j), *fast}) {
    REQUIRE(back.steps.detail.size() == 3);
    CHECK(back.steps.detail[1].gpu_health.empty());
    const std::vector<core::StepHealth>& h = back.steps.detail[0].gpu_health;
    REQUIRE(h.size() == 2);
    CHECK(h[0].cuda_device == 2);
    CHECK(h[0].samples == 1);
    CHECK(h[0].sm_clock_mhz_median == 1500);
    CHECK(h[0].sm_clock_mhz_min == 1500);
    CHECK(h[0].power_w_median == 400);
    CHECK(h[0].temperature_c_max == 50);
    CHECK(h[0].clock_event_reasons.has(core::ClockEventReason::kHwThermalSlowdown));
    CHECK(h[0].clock_event_reasons.bits == 0x40);
    CHECK(h[1].clock_event_reasons.bits == 0x1);
    CHECK(back.steps.detail[2].gpu_health[0].sm_clock_mhz_median == 1402);
  }

  // A file from a writer before the field: the rows read without it.
  nlohmann::json old = j;
  for (nlohmann::json& row : old["steps"]["detail"]) row.erase("gpu_health");
  old.erase("gpu_health");
  for (const core::Steps::Detail& row : core::rank_file_from_json(old).steps.detail)
    CHECK(row.gpu_health.empty());
}

TEST_CASE("nothing is written before CUDA is in use, and off is one status", "[nvml]") {
  nvml::configure(options(SIMGPU_NVML_LIB), hooks());
  CHECK(nvml::gpu_health(nvml::summary()) == nullptr);
  core::RankFile f = core::build_rank_file({}, {}, {}, {}, {}, nvml::summary());
  CHECK_FALSE(core::rank_file_to_json(f).contains("gpu_health"));

  nvml::Options off = options(SIMGPU_NVML_LIB);
  off.enabled = false;
  nvml::configure(off, hooks());
  nvml::start();
  const core::HealthSummary s = nvml::summary();
  uint64_t live_step = 0;
  core::StepHealth live;
  CHECK_FALSE(nvml::live_health(&live_step, &live));
  REQUIRE(nvml::gpu_health(s));
  CHECK(nvml::gpu_health(s)->status == "off");
  CHECK(nvml::gpu_health(s)->devices.empty());
  CHECK(s.section.counters.counters.empty());
}

TEST_CASE("a missing NVML is one status line, start() keeps errno", "[nvml]") {
  nvml::configure(options("libnvidia-ml-missing.so.1"), hooks());
  errno = 42;
  nvml::start();
  CHECK(errno == 42);
  const core::HealthSummary s = wait_for_samples(1);
  nvml::stop();
  REQUIRE(nvml::gpu_health(s));
  CHECK(nvml::gpu_health(s)->status == "unavailable: libnvidia-ml-missing.so.1 not found");
  uint64_t live_step = 0;
  core::StepHealth live;
  CHECK_FALSE(nvml::live_health(&live_step, &live));
  CHECK(nvml::gpu_health(s)->devices.empty());
}

TEST_CASE("the sampler reads simgpu's throttled GPU, matched by PCI bus id, per step", "[nvml][sim]") {
  // simgpu reads both once, at its first call (this one's: no test before it touches simgpu).
  setenv("RANK", "2", 1);
  setenv("SIMGPU_THROTTLE", "2:0.7", 1);
  // The device comes into use: the runtime makes its primary context current.
  REQUIRE(cudaFree(nullptr) == cudaSuccess);
  simgpu_health truth{};
  simgpu_health_of(2, &truth);
  REQUIRE(truth.sm_clock_mhz == 1386);  // 1980 x 0.7: the knob reached simgpu
  g_step = 5;
  nvml::configure(options(SIMGPU_NVML_LIB), hooks());
  nvml::start();
  wait_for_samples(3);
  g_step = 6;
  const core::HealthSummary s = wait_for_samples(6);
  nvml::stop();
  const nvml::GpuHealth* health = nvml::gpu_health(s);
  REQUIRE(health);
  REQUIRE(health->status == "sampled");
  CHECK(health->interval_ms == 10);
  REQUIRE(health->devices.size() == 1);
  const nvml::HealthDevice& d = health->devices[0];
  CHECK(d.cuda_device == 0);
  CHECK(d.pci_bus_id == "0000:02:00.0");
  CHECK_FALSE(d.mig);
  const nvml::HealthFigures& run = d.run;
  CHECK(run.samples >= 6);
  CHECK(run.sm_clock_mhz_median == truth.sm_clock_mhz);
  CHECK(run.sm_clock_mhz_min == truth.sm_clock_mhz);
  CHECK(run.mem_clock_mhz_median == truth.mem_clock_mhz);
  CHECK(run.power_w_median == Approx(truth.power_mw / 1000.0));
  CHECK(run.power_limit_w == Approx(truth.power_limit_mw / 1000.0));
  CHECK(run.temperature_c_max == truth.temperature_c);
  CHECK(core::clock_event_reason_names(run.clock_event_reasons) ==
        std::vector<std::string>{"sw_thermal_slowdown", "hw_thermal_slowdown"});
  CHECK(run.pcie_gen_min == truth.pcie_gen);
  CHECK(run.pcie_width_min == truth.pcie_width);
  CHECK(run.memory_used_bytes_max == truth.memory_used_bytes);
  CHECK(run.memory_total_bytes == truth.memory_total_bytes);
  REQUIRE(d.steps.size() == 2);
  CHECK(d.steps[0].index == 5);
  CHECK(d.steps[1].index == 6);
  CHECK(d.steps[0].figures.samples + d.steps[1].figures.samples == run.samples);
  CHECK(s.section.counters.counters.at("failed_reads") == 0);

  // Step 5 ended (samples of step 6 came): the live metrics' figures, simgpu's truth.
  uint64_t live_step = 0;
  core::StepHealth live;
  REQUIRE(nvml::live_health(&live_step, &live));
  CHECK(live_step == 5);
  CHECK(live.cuda_device == 0);
  CHECK(live.samples == d.steps[0].figures.samples);
  CHECK(live.sm_clock_mhz_median == truth.sm_clock_mhz);
  CHECK(live.sm_clock_mhz_min == truth.sm_clock_mhz);
  CHECK(live.power_w_median == Approx(truth.power_mw / 1000.0));
  CHECK(live.temperature_c_max == truth.temperature_c);
  CHECK(live.clock_event_reasons.bits == truth.clock_event_reasons);
  CHECK(live.clock_event_reasons.throttled());

  // Through the builder and both readers, unchanged.
  const core::RankFile built = core::build_rank_file({}, {}, {}, {}, {}, s);
  const nlohmann::json j = core::rank_file_to_json(built);
  CHECK(j.at("modules").at("nvml").at("counters").at("samples") == run.samples);
  const core::RankFile back = core::rank_file_from_json(j);
  const nvml::GpuHealth* read = nvml::gpu_health(back);
  REQUIRE(read);
  REQUIRE(read->devices.size() == 1);
  CHECK(read->devices[0].run.sm_clock_mhz_median == truth.sm_clock_mhz);
  CHECK(read->devices[0].steps[1].figures.clock_event_reasons == run.clock_event_reasons);
  const std::optional<core::RankFile> fast = through_the_file(built);
  REQUIRE(fast);
  const nvml::GpuHealth* read_fast = nvml::gpu_health(*fast);
  REQUIRE(read_fast);
  CHECK(read_fast->status == "sampled");
  CHECK(read_fast->devices[0].run.power_w_median == Approx(truth.power_mw / 1000.0));
  CHECK(read_fast->devices[0].steps[0].index == 5);
}

TEST_CASE("gpu_health of a file an older release wrote on a real GPU reads through the module's reader", "[nvml][schema]") {
  // Written on an H200 before the module's section had a version (modules.nvml.version absent)
  // and before gpu_health moved out of core's schema: read through both readers alike.
  const std::string path = std::string(SOURCE_DIR) + "/tests/fixtures/gpu-20261128/torch_profiler/rank.json";
  std::string error, bytes;
  REQUIRE(core::read_file_bytes(path, &bytes, &error));
  const std::optional<core::RankFile> slow = core::rank_file_from_text(path, bytes, &error);
  const std::optional<core::RankFile> fast = core::read_rank_file(path, &error);
  INFO(error);
  REQUIRE(slow);
  REQUIRE(fast);
  for (const core::RankFile* f : {&*slow, &*fast}) {
    CHECK(f->read_notes.empty());
    CHECK(f->modules.at("nvml").version == 0);  // none written then
    const nvml::GpuHealth* h = nvml::gpu_health(*f);
    REQUIRE(h);
    CHECK(h->status == "sampled");
    CHECK(h->interval_ms == 100);
    REQUIRE(h->devices.size() == 1);
    CHECK(h->devices[0].pci_bus_id == "0000:00:06.0");
    CHECK(h->devices[0].run.samples == 86);
    CHECK(h->devices[0].run.sm_clock_mhz_median == 1980);
    CHECK(h->devices[0].steps.size() == 5);
    REQUIRE_FALSE(f->steps.detail.empty());
    REQUIRE(f->steps.detail[0].gpu_health.size() == 1);
    CHECK(f->steps.detail[0].gpu_health[0].samples == 61);
  }
  // Written again by this release: the same gpu_health, now with the module's version.
  const nlohmann::json original = nlohmann::json::parse(bytes);
  const nlohmann::json again = core::rank_file_to_json(*fast);
  CHECK(again.at("gpu_health") == original.at("gpu_health"));
  CHECK(again.at("modules").at("nvml").at("version") == nvml::kFormat.version);
}

TEST_CASE("a module section newer than the reader: one note, its counters read, its data left out", "[nvml][schema]") {
  auto g = std::make_shared<nvml::GpuHealth>();
  g->status = "sampled";
  g->interval_ms = 100;
  core::HealthSummary health;
  nvml::hand_up(g, &health);
  health.section.count(nvml::kCounters, nvml::Counter::samples, 12);
  core::CpuSummary cpu;
  cpu.steps.count = 3;
  nlohmann::json j = core::rank_file_to_json(core::build_rank_file({}, cpu, {}, {}, {}, health));
  REQUIRE(j.at("modules").at("nvml").at("version") == nvml::kFormat.version);
  REQUIRE(j.contains("gpu_health"));
  j["modules"]["nvml"]["version"] = nvml::kFormat.version + 1;
  j["gpu_health"] = {{"status", 7}, {"shape", "changed"}};  // what this reader could not read
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nvml-newer-" + std::to_string(getpid()) + ".json")).string();
  {
    std::ofstream(path) << j.dump();
  }
  std::string error;
  const std::optional<core::RankFile> fast = core::read_rank_file(path, &error);
  std::filesystem::remove(path);
  INFO(error);
  REQUIRE(fast);
  for (const core::RankFile& f : {core::rank_file_from_json(j), *fast}) {
    CHECK(nvml::gpu_health(f) == nullptr);
    CHECK(f.modules.at("nvml").counters.at("samples") == 12);
    CHECK(f.modules.at("nvml").version == nvml::kFormat.version + 1);
    CHECK(f.steps.count == 3);
    REQUIRE(f.read_notes.size() == 1);
    const std::string& note = f.read_notes[0];
    CHECK(note.find("module \"nvml\"") != std::string::npos);
    CHECK(note.find("version " + std::to_string(nvml::kFormat.version + 1)) != std::string::npos);
    CHECK(note.find("gpu_health") != std::string::npos);
    CHECK(note.find("traintime-report") != std::string::npos);  // what to do
    CHECK(note.find('\n') == std::string::npos);
  }
  // At the version it knows, the same broken section refuses the file, naming the field.
  j["modules"]["nvml"]["version"] = nvml::kFormat.version;
  CHECK_THROWS_WITH(core::rank_file_from_json(j), Catch::Contains("\"gpu_health.status\" must be a string"));
}

TEST_CASE("docs/schema.md lists gpu_health and the module's counters", "[nvml][doc]") {
  std::ifstream in(std::string(SOURCE_DIR) + "/docs/schema.md");
  REQUIRE(in.good());
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(doc.find("| `nvml` |") != std::string::npos);
  for (const char* key : {"`gpu_health`", "`samples`", "`failed_reads`", "`clock_event_reasons`",
                          "`sm_clock_mhz`", "`pci_bus_id`", "`mig`"}) {
    INFO(key);
    CHECK(doc.find(key) != std::string::npos);
  }
  for (std::string_view name : core::kClockEventReasonNames) {
    INFO(name);
    CHECK(doc.find("`" + std::string(name) + "`") != std::string::npos);
  }
}
