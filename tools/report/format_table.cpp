// --format's table: every output format of the report behind one interface (render.h, Format).
// text, md, csv, html and summary render the Document built from the report's views; json writes
// the views' figures as the machine-readable summary.
#include <nlohmann/json.hpp>

#include "render.h"

namespace traintime::report {
namespace {

std::string text(const Report& r, const Extras& x) { return render_text(build_document(r, x)); }
std::string summary(const Report& r, const Extras& x) { return render_summary(build_document(r, x)); }
std::string markdown(const Report& r, const Extras& x) { return render_markdown(build_document(r, x)); }
std::string csv(const Report& r, const Extras& x) { return render_csv(build_document(r, x)); }
std::vector<std::pair<std::string, std::string>> csv_files(const Report& r, const Extras& x) {
  return render_csv_tables(build_document(r, x));
}
std::string html(const Report& r, const Extras& x) { return render_html(build_document(r, x), r, x); }
std::string json(const Report& r, const Extras& x) {
  return summary_json(r, x).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

const Format kFormats[] = {
    {"text", true, text, nullptr},       {"md", true, markdown, nullptr},   {"csv", false, csv, csv_files},
    {"json", false, json, nullptr},      {"html", false, html, nullptr},   {"summary", false, summary, nullptr},
};

}  // namespace

std::vector<std::string> format_names() {
  std::vector<std::string> names;
  for (const Format& f : kFormats) names.emplace_back(f.name);
  return names;
}

const Format* find_format(const std::string& name) {
  for (const Format& f : kFormats)
    if (name == f.name) return &f;
  return nullptr;
}

}  // namespace traintime::report
