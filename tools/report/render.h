// The report's output formats (docs/report.md). text, md, csv and html render one Document (the
// diagnosis lines and the tables); json is the machine-readable summary built from the Report.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis.h"
#include "gate.h"

namespace traintime::report {

struct Table {
  std::string id;     // the view's name: the csv file's suffix, the html anchor
  std::string title;  // with the units
  std::vector<std::string> headers;
  std::vector<bool> numeric;  // right-aligned
  std::vector<std::vector<std::string>> rows;
  std::string note;  // what the numbers mean, one or two sentences
  std::size_t text_rows = 0;  // text and md show at most this many rows (0: all); csv, html all
  bool as_lines = false;      // text shows each row as "first: rest" lines (long free text)
  // A column of demangled C++ signatures (kernel names, up to ~2000 characters): text and md show
  // short_signature() of each, html the short form with the whole name folded under it; csv all.
  std::size_t signature_column = static_cast<std::size_t>(-1);
  // Why the table has no row when it has none ("no rank wrote one"): text, md and html leave an
  // empty table out and name it in one line with this (shown_tables); csv keeps every view.
  std::string empty_why;
};

struct Section {
  std::string title;
  std::vector<std::string> lines;
  bool summary = false;  // one of the sections --format summary prints (the run, stragglers, where the time goes)
};

struct Document {
  std::string heading;             // one line: job, ranks, directory
  std::vector<Section> diagnosis;  // first in every format
  std::vector<Table> tables;
  // The answer in three lines: the straggler and its cost, the largest share of the step, where
  // the HTML report is. Text and md end with it; html opens with it.
  Section summary;
};

// What the run of the tool adds to the report: the comparison, the gate's verdicts, and an HTML
// report already written beside the rank files for this job (its path; "" when there is none).
struct Extras {
  const Comparison* comparison = nullptr;
  const std::vector<Verdict>* verdicts = nullptr;
  std::string html_path;
};

// The tables with rows, in order, and (into *left_out) one line naming each empty one and why:
// what text, md and html show.
std::vector<const Table*> shown_tables(const Document& d, std::string* left_out);

Document build_document(const Report& r, const Extras& x);

std::string render_text(const Document& d);
// The heading and the diagnosis's summary sections only (`traintime run` prints it after the job).
std::string render_summary(const Document& d);
std::string render_markdown(const Document& d);
// Every table, each as its own CSV with a header row ("# view: ID" before it, a blank line after).
std::string render_csv(const Document& d);
// One CSV per table, as (view id, text); for -o: FILE's stem + "." + id + ".csv".
std::vector<std::pair<std::string, std::string>> render_csv_tables(const Document& d);
std::string render_html(const Document& d, const Report& r, const Extras& x);
nlohmann::json summary_json(const Report& r, const Extras& x);

// One output format of --format (format_table.cpp): every format is reached through this table.
struct Format {
  const char* name;
  // The text report's summary names a report.html beside the rank files that is current (Extras).
  bool names_html;
  // The report in this format, one text.
  std::string (*render)(const Report& r, const Extras& x);
  // For -o naming a folder: one (name, text) per file, FILE = name + ".csv"; null: one file only.
  std::vector<std::pair<std::string, std::string>> (*render_files)(const Report& r, const Extras& x);
};
// The formats' names, the default (text) first.
std::vector<std::string> format_names();
// The format of that name; null when there is none.
const Format* find_format(const std::string& name);

// Display width of UTF-8 text (code points; every name here is narrow).
// "1.5 MiB": bytes in binary units, one decimal above 1 KiB.
std::string bytes_text(double b);
std::size_t display_width(const std::string& s);

// A demangled C++ signature (a kernel's name) within `width` columns, each step taken only while it
// is still too wide: the leading "void " and the parameter list dropped; template arguments nested
// in others shown as "<...>"; all of them, unless the name before them is under half the width
// (cutlass::Kernel<...>: then they name the kernel); then the middle cut ("..."), keeping a third of the width
// from the start and the rest from the end, where a kernel's variants differ
// (..._unweighted_kernel_cta_per_row_1 and ..._weighted_kernel_warp_per_row_1). Unchanged when it fits.
std::string short_signature(const std::string& name, std::size_t width);
// short_signature() of each name, but distinct names it would show alike keep one more level of
// template arguments at a time (up to 4) until they differ: the cells of one column.
std::vector<std::string> short_signatures(const std::vector<std::string>& names, std::size_t width);

}  // namespace traintime::report
