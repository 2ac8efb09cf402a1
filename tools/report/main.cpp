// traintime-report DIR: the job's rank files merged into answers (DESIGN §7, docs/report.md).
// Exit status: 0 report written, no --fail-if condition held; 1 a --fail-if condition held;
// 2 nothing usable (no readable rank file), or a usage error.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "gate.h"
#include "render.h"
#include "trace_export.h"
#include "watch.h"

#include <nlohmann/json.hpp>

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"traintime-report: merge a job's traintime rank files into tables, stragglers, exposed "
               "communication, hangs, HTML and traces (docs/report.md)."};
  std::string dir, format = "text", output, trace, compare_dir, job;
  std::vector<std::string> fail_if;
  app.add_option("DIR", dir,
                 "folder with the job's rank-*.json files (TRAINTIME_OUTPUT, else traintime-out/), a folder above "
                 "it, or one rank file")
      ->required();
  app.add_option("--format", format,
                 "text (default), md, csv, json, html, or summary (the diagnosis's run, stragglers and where the time "
                 "goes: what `traintime run` prints after the job)")
      ->check(CLI::IsMember({"text", "md", "csv", "json", "html", "summary"}));
  app.add_option("-o,--output", output,
                 "write the report to FILE instead of stdout (csv: into a folder, one FILE per view, when it "
                 "names an existing folder)");
  app.add_option("--trace", trace, "also write a Chrome/Perfetto trace of the ranks that kept a TRAINTIME_TRACE=1 timeline");
  app.add_option("--compare", compare_dir, "a baseline run's folder: show the change of every headline metric");
  app.add_option("--fail-if", fail_if,
                 "exit 1 when a condition holds, e.g. 'exposed_comm_pct>20' or 'step_time_p50>+5%' (a signed value "
                 "is a change against --compare); repeatable; grammar in docs/report.md");
  app.add_option("--job", job, "report this job_id (default: the job with the most rank files in DIR)");
  bool latest = false;
  app.add_flag("--latest", latest,
               "report the job whose rank files were written last instead of the one with the most (what "
               "`traintime run` reports after the job)")
      ->excludes("--job");
  double watch_s = 2.0;
  bool once = false;
  CLI::Option* watch = app.add_option("--watch", watch_s,
                                      "keep one terminal screen current from the newest rank files of a running job, "
                                      "re-read every SECONDS (default 2); q or Ctrl-C quits")
                           ->expected(0, 1)
                           ->check(CLI::Range(0.1, 86400.0));
  app.add_flag("--once", once, "with --watch: print one screen and exit (for tests and scripts that poll)")->needs(watch);
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

  std::vector<tr::Condition> conditions;
  try {
    for (const std::string& expr : fail_if)
      for (tr::Condition& c : tr::parse_fail_if(expr)) {
        if (c.against != tr::Condition::Against::kValue && compare_dir.empty())
          throw tr::UsageError("--fail-if \"" + c.text +
                               "\": a signed value is a change against another run; give --compare DIR");
        conditions.push_back(std::move(c));
      }
  } catch (const tr::UsageError& e) {
    say(e.what());
    return kUnusable;
  }

  tr::LoadOptions options;
  if (!job.empty()) options.job = job;
  options.latest = latest;
  if (*watch) {
    if (watch->results().empty() || watch->results()[0].empty()) watch_s = 2.0;  // --watch without SECONDS
    if (!fail_if.empty() || !compare_dir.empty() || !output.empty() || !trace.empty() || format != "text") {
      say("--watch draws one text screen: leave out --format, -o, --trace, --compare and --fail-if");
      return kUnusable;
    }
    return tr::run_watch(dir, options, watch_s, once);
  }
  options.progress = ::isatty(STDERR_FILENO) != 0;
  const tr::Job loaded = tr::load_job(dir, options);
  print_problems(loaded);
  if (loaded.ranks.empty()) {
    // One line per problem: a problem with the folder itself already says why nothing is usable.
    bool folder_said = false;
    for (const tr::Problem& p : loaded.problems) folder_said = folder_said || p.file == dir || p.file == loaded.dir;
    if (!folder_said)
      say("nothing usable in " + loaded.dir + ": no rank file of " +
          (job.empty() ? std::string("any job") : "job \"" + job + "\"") + " could be read (problems above)");
    return kUnusable;
  }
  const tr::Report report = tr::analyze(loaded);

  std::optional<tr::Report> base;
  std::optional<tr::Comparison> comparison;
  if (!compare_dir.empty()) {
    tr::LoadOptions base_options;
    base_options.progress = options.progress;
    const tr::Job base_job = tr::load_job(compare_dir, base_options);
    for (const tr::Problem& p : base_job.problems) say("--compare: " + p.file + ": " + p.message);
    if (base_job.ranks.empty()) {
      say("nothing usable in --compare " + compare_dir + ": no rank file could be read (problems above)");
      return kUnusable;
    }
    base = tr::analyze(base_job);
    comparison = tr::compare(report, *base);
  }
  std::vector<tr::Verdict> verdicts;
  try {
    verdicts = tr::evaluate(conditions, report, base ? &*base : nullptr);
  } catch (const tr::UsageError& e) {
    say(e.what());
    return kUnusable;
  }

  tr::Extras extras;
  extras.comparison = comparison ? &*comparison : nullptr;
  extras.verdicts = conditions.empty() ? nullptr : &verdicts;
  if (format == "text" || format == "md") extras.html_path = current_html(loaded);

  std::string text;
  if (format == "json") {
    text = tr::summary_json(report, extras).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    const tr::Document doc = tr::build_document(report, extras);
    if (format == "text") text = tr::render_text(doc);
    if (format == "summary") text = tr::render_summary(doc);
    if (format == "md") text = tr::render_markdown(doc);
    if (format == "html") text = tr::render_html(doc, report, extras);
    if (format == "csv") {
      std::error_code ec;
      if (!output.empty() && std::filesystem::is_directory(output, ec)) {
        for (const auto& [id, csv] : tr::render_csv_tables(doc)) {
          const std::string path = (std::filesystem::path(output) / (id + ".csv")).string();
          if (!write_file(path, csv)) return kUnusable;
        }
        say("csv views written to " + output + "/ (one file per view)");
        output.clear();
        text.clear();
      } else {
        text = tr::render_csv(doc);
      }
    }
  }
  if (!output.empty()) {
    if (!write_file(output, text)) return kUnusable;
    say(format + " report written to " + output);
  } else if (!text.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }

  if (!trace.empty()) {
    std::vector<std::string> trace_problems;
    const std::size_t ranks = tr::export_trace(loaded, trace, trace_problems);
    for (const std::string& p : trace_problems) say(p);
    if (ranks > 0) say("trace of " + std::to_string(ranks) + " rank(s) written to " + trace + " (open it in ui.perfetto.dev or chrome://tracing)");
  }

  bool held = false;
  for (const tr::Verdict& v : verdicts) {
    if (v.holds) {
      say("--fail-if: " + v.explanation);
      held = true;
    }
  }
  return held ? kGateHeld : kOk;
}
