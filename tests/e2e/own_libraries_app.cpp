// An application with its own spdlog (the shared libspdlog, with libfmt), fmt and nlohmann_json,
// the libraries traintime compiles into itself privately. test_e2e.py runs it with and without
// LD_PRELOAD=libtraintime.so (and traintime's own logging turned up): its output, its loggers'
// configuration and its exit status must be the same, whatever traintime logs at the same time.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "traintime/traintime.h"

int main() {
  auto app = spdlog::stdout_logger_st("app");
  spdlog::set_default_logger(app);
  spdlog::set_pattern("[%n] %l %v");
  spdlog::set_level(spdlog::level::debug);
  for (int step = 0; step < 3; ++step) {
    tt_push("forward");  // traintime records (and may log) while the app logs
    spdlog::debug("step {} of {}", step, 3);
    nlohmann::json j = {{"step", step}, {"loss", 1.0 / (step + 1)}, {"name", "\xce\xbb"}};
    spdlog::info("{}", j.dump());
    tt_pop();
    tt_step(8, 0);
  }
  std::fputs(fmt::format("{:>8}|{:<6}|{:x}\n", "done", 42, 255).c_str(), stdout);
  spdlog::info("default logger is still '{}', level {}", spdlog::default_logger()->name(),
               spdlog::level::to_string_view(spdlog::get_level()));
  return spdlog::get("app") == app ? 0 : 3;
}
