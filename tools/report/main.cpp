// traintime-report DIR: the job's rank files merged into answers (DESIGN §7, docs/report.md).
// Exit status: 0 report written, no --fail-if condition held; 1 a --fail-if condition held;
// 2 nothing usable (no readable rank file), or a usage error.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "gate.h"
#include "render.h"
#include "trace_export.h"
#include "watch.h"

namespace tr = traintime::report;

namespace {

constexpr int kOk = 0, kGateHeld = 1, kUnusable = 2;

void say(const std::string& line) { std::fprintf(stderr, "traintime-report: %s\n", line.c_str()); }

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    say(path + ": cannot write the report here (check the folder exists and is writable)");
    return false;
  }
  return true;
}

// An HTML report beside the rank files written after the newest of them (the demo writes one
// there): the text report's summary says where it is. "" when there is none, or it is older.
std::string current_html(const tr::Job& job) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path html = fs::path(job.dir) / "report.html";
  const fs::file_time_type written = fs::last_write_time(html, ec);
  if (ec) return "";
  for (const tr::RankInput& r : job.ranks)
    if (fs::last_write_time(r.file, ec) > written || ec) return "";
  return html.string();
}

void print_problems(const tr::Job& job) {
  for (const tr::Problem& p : job.problems) say(p.file + ": " + p.message);
}

struct Args {
  std::string dir, format = "text", output, trace, compare_dir, job;
  std::vector<std::string> fail_if;
  bool latest = false;
  bool watch = false;
  double watch_s = 2.0;
  bool once = false;
};

// The command line into `a`; an exit status when the run ends here (--help, --version, a usage error).
std::optional<int> parse_args(int argc, char** argv, Args& a) {
  CLI::App app{"traintime-report: merge a job's traintime rank files into tables, stragglers, exposed "
               "communication, hangs, HTML and traces (docs/report.md)."};
  app.add_option("DIR", a.dir,
                 "folder with the job's rank-*.json files (TRAINTIME_OUTPUT, else traintime-out/), a folder above "
                 "it, or one rank file")
      ->required();
  app.add_option("--format", a.format,
                 "text (default), md, csv, json, html, or summary (the diagnosis's run, stragglers and where the time "
                 "goes: what `traintime run` prints after the job)")
      ->check(CLI::IsMember(tr::format_names()));
  app.add_option("-o,--output", a.output,
                 "write the report to FILE instead of stdout (csv: into a folder, one FILE per view, when it "
                 "names an existing folder)");
  app.add_option("--trace", a.trace, "also write a Chrome/Perfetto trace of the ranks that kept a TRAINTIME_TRACE=1 timeline");
  app.add_option("--compare", a.compare_dir, "a baseline run's folder: show the change of every headline metric");
  app.add_option("--fail-if", a.fail_if,
                 "exit 1 when a condition holds, e.g. 'exposed_comm_pct>20' or 'step_time_p50>+5%' (a signed value "
                 "is a change against --compare); repeatable; grammar in docs/report.md");
  app.add_option("--job", a.job, "report this job_id (default: the job with the most rank files in DIR)");
  app.add_flag("--latest", a.latest,
               "report the job whose rank files were written last instead of the one with the most (what "
               "`traintime run` reports after the job)")
      ->excludes("--job");
  CLI::Option* watch = app.add_option("--watch", a.watch_s,
                                      "keep one terminal screen current from the newest rank files of a running job, "
                                      "re-read every SECONDS (default 2); q or Ctrl-C quits")
                           ->expected(0, 1)
                           ->check(CLI::Range(0.1, 86400.0));
  app.add_flag("--once", a.once, "with --watch: print one screen and exit (for tests and scripts that poll)")->needs(watch);
  app.set_version_flag("--version", std::string("traintime-report ") + TRAINTIME_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    say(std::string(e.what()) + " (see --help)");
    return kUnusable;
  }
  a.watch = static_cast<bool>(*watch);
  if (a.watch && (watch->results().empty() || watch->results()[0].empty())) a.watch_s = 2.0;  // --watch without SECONDS
  return std::nullopt;
}

// The --fail-if conditions; nullopt (said) on a usage error.
std::optional<std::vector<tr::Condition>> conditions_of(const Args& a) {
  std::vector<tr::Condition> conditions;
  try {
    for (const std::string& expr : a.fail_if)
      for (tr::Condition& c : tr::parse_fail_if(expr)) {
        if (c.against != tr::Condition::Against::kValue && a.compare_dir.empty())
          throw tr::UsageError("--fail-if \"" + c.text +
                               "\": a signed value is a change against another run; give --compare DIR");
        conditions.push_back(std::move(c));
      }
  } catch (const tr::UsageError& e) {
    say(e.what());
    return std::nullopt;
  }
  return conditions;
}

// Whether the job has a rank file to report; if not, one line says why.
bool usable(const tr::Job& loaded, const Args& a) {
  if (!loaded.ranks.empty()) return true;
  // One line per problem: a problem with the folder itself already says why nothing is usable.
  bool folder_said = false;
  for (const tr::Problem& p : loaded.problems) folder_said = folder_said || p.file == a.dir || p.file == loaded.dir;
  if (!folder_said)
    say("nothing usable in " + loaded.dir + ": no rank file of " +
        (a.job.empty() ? std::string("any job") : "job \"" + a.job + "\"") + " could be read (problems above)");
  return false;
}

// --compare's baseline analysed; false (said) when its folder has no usable rank file.
bool load_baseline(const Args& a, const tr::LoadOptions& options, std::optional<tr::Report>& base) {
  if (a.compare_dir.empty()) return true;
  tr::LoadOptions base_options;
  base_options.progress = options.progress;
  const tr::Job base_job = tr::load_job(a.compare_dir, base_options);
  for (const tr::Problem& p : base_job.problems) say("--compare: " + p.file + ": " + p.message);
  if (base_job.ranks.empty()) {
    say("nothing usable in --compare " + a.compare_dir + ": no rank file could be read (problems above)");
    return false;
  }
  base = tr::analyze(base_job);
  return true;
}

// The report in --format to -o (csv: one file per view when -o names a folder) or stdout.
bool write_report(const tr::Format& format, const tr::Report& report, const tr::Extras& extras, const Args& a) {
  std::error_code ec;
  if (format.render_files && !a.output.empty() && std::filesystem::is_directory(a.output, ec)) {
    for (const auto& [id, text] : format.render_files(report, extras)) {
      const std::string path = (std::filesystem::path(a.output) / (id + "." + format.name)).string();
      if (!write_file(path, text)) return false;
    }
    say(std::string(format.name) + " views written to " + a.output + "/ (one file per view)");
    return true;
  }
  const std::string text = format.render(report, extras);
  if (!a.output.empty()) {
    if (!write_file(a.output, text)) return false;
    say(a.format + " report written to " + a.output);
  } else if (!text.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  return true;
}

void write_trace(const tr::Job& loaded, const std::string& trace) {
  std::vector<std::string> trace_problems;
  const std::size_t ranks = tr::export_trace(loaded, trace, trace_problems);
  for (const std::string& p : trace_problems) say(p);
  if (ranks > 0) say("trace of " + std::to_string(ranks) + " rank(s) written to " + trace + " (open it in ui.perfetto.dev or chrome://tracing)");
}

// The job's report, its trace, and the gate's verdicts: the exit status.
int report(const Args& a, const std::vector<tr::Condition>& conditions, tr::LoadOptions options) {
  options.progress = ::isatty(STDERR_FILENO) != 0;
  const tr::Job loaded = tr::load_job(a.dir, options);
  print_problems(loaded);
  if (!usable(loaded, a)) return kUnusable;
  const tr::Report report = tr::analyze(loaded);
  std::optional<tr::Report> base;
  if (!load_baseline(a, options, base)) return kUnusable;
  std::optional<tr::Comparison> comparison;
  if (base) comparison = tr::compare(report, *base);
  std::vector<tr::Verdict> verdicts;
  try {
    verdicts = tr::evaluate(conditions, report, base ? &*base : nullptr);
  } catch (const tr::UsageError& e) {
    say(e.what());
    return kUnusable;
  }
  const tr::Format& format = *tr::find_format(a.format);  // CLI11 took only the table's names
  tr::Extras extras;
  extras.comparison = comparison ? &*comparison : nullptr;
  extras.verdicts = conditions.empty() ? nullptr : &verdicts;
  if (format.names_html) extras.html_path = current_html(loaded);
  if (!write_report(format, report, extras, a)) return kUnusable;
  if (!a.trace.empty()) write_trace(loaded, a.trace);
  bool held = false;
  for (const tr::Verdict& v : verdicts) {
    if (v.holds) {
      say("--fail-if: " + v.explanation);
      held = true;
    }
  }
  return held ? kGateHeld : kOk;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (const std::optional<int> status = parse_args(argc, argv, a)) return *status;
  const std::optional<std::vector<tr::Condition>> conditions = conditions_of(a);
  if (!conditions) return kUnusable;
  tr::LoadOptions options;
  if (!a.job.empty()) options.job = a.job;
  options.latest = a.latest;
  if (a.watch) {
    if (!a.fail_if.empty() || !a.compare_dir.empty() || !a.output.empty() || !a.trace.empty() || a.format != "text") {
      say("--watch draws one text screen: leave out --format, -o, --trace, --compare and --fail-if");
      return kUnusable;
    }
    return tr::run_watch(a.dir, options, a.watch_s, a.once);
  }
  return report(a, *conditions, options);
}
