// text (aligned tables within 100 columns), md and csv renderings of the Document.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "render.h"

namespace traintime::report {
namespace {

constexpr std::size_t kWidth = 100;
// A signature cell in md, where a table has no width: what a reader takes in at a glance.
constexpr std::size_t kSignatureWidth = 120;

// A cell wrapped into lines of at most `width` columns, never cut from the left: each break goes
// after the last '/', ' ', ',', ':' or '.' of a line when one is past its first quarter (a path
// breaks between its parts), else at the width. Beyond `max_lines` (0: no limit; a row's name,
// the first column, is never cut) the last line ends "..." (a demangled kernel's template tail).
constexpr std::size_t kMaxCellLines = 6;

std::vector<std::string> wrap_cell(const std::string& s, std::size_t width, std::size_t max_lines) {
  // Code points, so that a break never splits a UTF-8 sequence.
  std::vector<std::size_t> starts;
  for (std::size_t k = 0; k < s.size(); ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) starts.push_back(k);
  std::vector<std::string> lines;
  width = std::max<std::size_t>(width, 4);
  std::size_t from = 0;  // index into starts
  while (from < starts.size()) {
    std::size_t to = std::min(starts.size(), from + width);
    if (to < starts.size()) {
      for (std::size_t k = to; k > from + width / 4; --k) {
        const char c = s[starts[k - 1]];
        if (c == '/' || c == ' ' || c == ',' || c == ':' || c == '.') {
          to = k;
          break;
        }
      }
    }
    const std::size_t end = to < starts.size() ? starts[to] : s.size();
    lines.push_back(s.substr(starts[from], end - starts[from]));
    from = to;
    if (max_lines > 0 && lines.size() == max_lines && from < starts.size()) {
      std::string& last = lines.back();
      std::vector<std::size_t> cut;
      for (std::size_t k = 0; k < last.size(); ++k)
        if ((static_cast<unsigned char>(last[k]) & 0xC0) != 0x80) cut.push_back(k);
      if (cut.size() + 3 > width) last = last.substr(0, cut[width - 3]);
      last += "...";
      break;
    }
  }
  if (lines.empty()) lines.push_back("");
  return lines;
}

// Drops what is nested deeper than `keep` levels of <...> (keep 0: every template argument list
// becomes "<...>").
std::string collapse_templates(const std::string& s, int keep) {
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '<') {
      if (depth == keep) out += "<...";
      ++depth;
      if (depth <= keep) out += c;
    } else if (c == '>' && depth > 0) {
      --depth;
      if (depth == keep) out += '>';
      else if (depth < keep) out += c;
    } else if (depth <= keep) {
      out += c;
    }
  }
  return out;
}

// Cuts in the middle: a third of the width from the start, the rest from the end.
std::string cut_middle(const std::string& s, std::size_t width) {
  if (display_width(s) <= width) return s;
  if (width <= 3) return std::string(width, '.');
  std::vector<std::size_t> starts;
  for (std::size_t k = 0; k < s.size(); ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) starts.push_back(k);
  const std::size_t head = (width - 3) / 3, tail = width - 3 - head;
  return s.substr(0, starts[head]) + "..." + s.substr(starts[starts.size() - tail]);
}

}  // namespace

namespace {

// short_signature() with template arguments kept down to `keep` levels (0: the first rules decide).
std::string shorten(const std::string& name, std::size_t width, int keep) {
  if (display_width(name) <= width) return name;
  std::string s = name.rfind("void ", 0) == 0 ? name.substr(5) : name;
  // The parameter list: the last top-level "(...)" group that ends the name.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t k = s.size(); k-- > 0;) {
      if (s[k] == ')' || s[k] == '>') ++depth;
      else if ((s[k] == '(' || s[k] == '<') && --depth == 0) {
        if (s[k] == '(' && k > 0) s.erase(k);
        break;
      }
    }
  }
  if (keep > 0) return cut_middle(display_width(s) > width ? collapse_templates(s, keep) : s, width);
  if (display_width(s) > width) s = collapse_templates(s, 1);
  // A short name ahead of its template arguments (cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>)
  // says what runs in them: they stay, cut in the middle, rather than fold away.
  const std::size_t ident = display_width(s.substr(0, s.find('<')));
  if (display_width(s) > width && 2 * ident >= width) s = collapse_templates(s, 0);
  return cut_middle(s, width);
}

}  // namespace

std::string short_signature(const std::string& name, std::size_t width) { return shorten(name, width, 0); }

std::vector<std::string> short_signatures(const std::vector<std::string>& names, std::size_t width) {
  std::vector<std::string> out;
  for (const std::string& n : names) out.push_back(short_signature(n, width));
  // Distinct names shown alike (at::native::vectorized_elementwise_kernel<...> of two functors) keep
  // one more level of template arguments each round until they differ.
  for (int keep = 1; keep <= 4; ++keep) {
    std::map<std::string, std::vector<std::size_t>> shown;
    for (std::size_t k = 0; k < out.size(); ++k) shown[out[k]].push_back(k);
    bool alike = false;
    for (const auto& [text, rows] : shown) {
      std::set<std::string> whole;
      for (std::size_t k : rows) whole.insert(names[k]);
      if (whole.size() < 2) continue;
      alike = true;
      for (std::size_t k : rows) out[k] = shorten(names[k], width, keep);
    }
    if (!alike) break;
  }
  return out;
}

namespace {

std::string pad(const std::string& s, std::size_t width, bool right) {
  const std::size_t w = display_width(s);
  if (w >= width) return s;
  return right ? std::string(width - w, ' ') + s : s + std::string(width - w, ' ');
}

// Word-wraps `text` to kWidth columns; continuation lines get `indent`.
void wrap(std::string& out, const std::string& text, const std::string& first, const std::string& indent) {
  std::string line = first;
  std::size_t pos = 0;
  bool empty_line = true;
  while (pos <= text.size()) {
    std::size_t sp = text.find(' ', pos);
    if (sp == std::string::npos) sp = text.size();
    const std::string word = text.substr(pos, sp - pos);
    if (!empty_line && display_width(line) + 1 + display_width(word) > kWidth) {
      out += line + "\n";
      line = indent;
      empty_line = true;
    }
    line += (empty_line ? "" : " ") + word;
    empty_line = false;
    pos = sp + 1;
  }
  out += line + "\n";
}

void text_table(std::string& out, const Table& t) {
  out += "\n" + t.title + "\n";
  if (t.rows.empty()) {  // with the note, which may say why (a table always shown)
    out += "  (none)\n";
    if (!t.note.empty()) wrap(out, "Note: " + t.note, "  ", "  ");
    return;
  }
  const std::size_t shown = t.text_rows ? std::min(t.text_rows, t.rows.size()) : t.rows.size();
  if (t.as_lines) {
    for (std::size_t r = 0; r < shown; ++r) {
      std::string rest;
      for (std::size_t c = 1; c < t.rows[r].size(); ++c)
        if (!t.rows[r][c].empty()) rest += (rest.empty() ? "" : "; ") + t.rows[r][c];
      wrap(out, t.rows[r][0] + ": " + rest, "  ", "      ");
    }
  } else {
    const std::size_t n = t.headers.size();
    std::vector<std::size_t> w(n);
    for (std::size_t c = 0; c < n; ++c) {
      w[c] = display_width(t.headers[c]);
      for (std::size_t r = 0; r < shown; ++r) w[c] = std::max(w[c], display_width(t.rows[r][c]));
    }
    // Within kWidth: the widest text column gives way first and wraps (numbers never do).
    auto total = [&] {
      std::size_t s = 2 + 2 * (n - 1);
      for (std::size_t x : w) s += x;
      return s;
    };
    while (total() > kWidth) {
      std::size_t widest = n;
      for (std::size_t c = 0; c < n; ++c)
        if (!t.numeric[c] && w[c] > 8 && (widest == n || w[c] > w[widest])) widest = c;
      if (widest == n) break;
      w[widest] -= std::min(w[widest] - 8, total() - kWidth);
    }
    std::vector<std::string> signatures;
    if (t.signature_column < n) {
      for (std::size_t r = 0; r < shown; ++r) signatures.push_back(t.rows[r][t.signature_column]);
      signatures = short_signatures(signatures, w[t.signature_column]);
    }
    auto line = [&](const std::vector<std::string>& cells, std::size_t row) {
      std::vector<std::vector<std::string>> wrapped(n);
      std::size_t height = 1;
      for (std::size_t c = 0; c < n; ++c) {
        if (row < signatures.size() && c == t.signature_column)
          wrapped[c] = {signatures[row]};  // shortened to the width already
        else
          wrapped[c] = display_width(cells[c]) <= w[c] ? std::vector<std::string>{cells[c]}
                                                        : wrap_cell(cells[c], w[c], c == 0 ? 0 : kMaxCellLines);
        height = std::max(height, wrapped[c].size());
      }
      for (std::size_t k = 0; k < height; ++k) {
        std::string l = " ";
        for (std::size_t c = 0; c < n; ++c)
          l += " " + pad(k < wrapped[c].size() ? wrapped[c][k] : "", w[c], t.numeric[c]);
        while (!l.empty() && l.back() == ' ') l.pop_back();
        out += l + "\n";
      }
    };
    constexpr std::size_t kNoRow = static_cast<std::size_t>(-1);
    line(t.headers, kNoRow);
    std::vector<std::string> rule;
    for (std::size_t c = 0; c < n; ++c) rule.push_back(std::string(w[c], '-'));
    line(rule, kNoRow);
    for (std::size_t r = 0; r < shown; ++r) line(t.rows[r], r);
  }
  if (shown < t.rows.size())
    out += "  ... " + std::to_string(t.rows.size() - shown) + " more rows (all of them with --format csv or json)\n";
  if (!t.note.empty()) wrap(out, "Note: " + t.note, "  ", "  ");
}

std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '\n') out += ' ';
    else if (c == '*' || c == '_' || c == '`' || c == '[' || c == ']' || c == '\\') out += std::string("\\") + c;
    else out += c;
  }
  return out;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string snake(const std::string& h) {
  std::string out;
  for (std::size_t k = 0; k < h.size(); ++k) {
    const unsigned char c = static_cast<unsigned char>(h[k]);
    if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
    else if (h[k] == '%') out += out.empty() || out.back() == '_' ? "pct" : "_pct";
    else if (h[k] == '/') out += "_per_";
    else if (h[k] == '+') out += "_";
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

std::string csv_table(const Table& t) {
  std::string out;
  for (std::size_t c = 0; c < t.headers.size(); ++c) out += (c ? "," : "") + csv_cell(snake(t.headers[c]));
  out += "\n";
  for (const auto& row : t.rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out += (c ? "," : "") + csv_cell(row[c]);
    out += "\n";
  }
  return out;
}

}  // namespace

std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

namespace {

// The heading and the diagnosis (only its summary sections when summary_only), as the text report starts.
std::string text_diagnosis(const Document& d, bool summary_only) {
  std::string out;
  wrap(out, d.heading, "", "  ");
  out += "\nDIAGNOSIS\n";
  for (const Section& s : d.diagnosis) {
    if (summary_only && !s.summary) continue;
    out += s.title + ":\n";
    for (const std::string& l : s.lines) {
      const bool sub = l.rfind("  ", 0) == 0;
      wrap(out, sub ? l.substr(2) : l, sub ? "      " : "  - ", sub ? "        " : "    ");
    }
  }
  return out;
}

}  // namespace

std::string render_text(const Document& d) {
  std::string out = text_diagnosis(d, false);
  std::string left_out;
  for (const Table* t : shown_tables(d, &left_out)) text_table(out, *t);
  if (!left_out.empty()) wrap(out, left_out, "\n", "");
  if (!d.summary.lines.empty()) {
    out += "\n";
    wrap(out, d.summary.title, "", "  ");
    for (const std::string& l : d.summary.lines) wrap(out, l, "  ", "    ");
  }
  return out;
}

std::string render_summary(const Document& d) { return text_diagnosis(d, true); }

std::string render_markdown(const Document& d) {
  std::string out = "# " + md_cell(d.heading) + "\n\n## Diagnosis\n";
  for (const Section& s : d.diagnosis) {
    out += "\n### " + md_cell(s.title) + "\n\n";
    for (const std::string& l : s.lines) {
      const bool sub = l.rfind("  ", 0) == 0;
      out += (sub ? "  - " + md_cell(l.substr(2)) : "- " + md_cell(l)) + "\n";
    }
  }
  std::string left_out;
  for (const Table* tp : shown_tables(d, &left_out)) {
    const Table& t = *tp;
    out += "\n## " + md_cell(t.title) + "\n\n";
    if (t.rows.empty()) {
      out += "(none)\n";
      if (!t.note.empty()) out += "\n_" + md_cell(t.note) + "_\n";
      continue;
    }
    out += "|";
    for (const std::string& h : t.headers) out += " " + md_cell(h) + " |";
    out += "\n|";
    for (std::size_t c = 0; c < t.headers.size(); ++c) out += t.numeric[c] ? " ---: |" : " --- |";
    out += "\n";
    const std::size_t shown = t.text_rows ? std::min(t.text_rows, t.rows.size()) : t.rows.size();
    std::vector<std::string> signatures;
    if (t.signature_column < t.headers.size()) {
      for (std::size_t r = 0; r < shown; ++r) signatures.push_back(t.rows[r][t.signature_column]);
      signatures = short_signatures(signatures, kSignatureWidth);
    }
    for (std::size_t r = 0; r < shown; ++r) {
      out += "|";
      for (std::size_t c = 0; c < t.rows[r].size(); ++c)
        out += " " + md_cell(c == t.signature_column ? signatures[r] : t.rows[r][c]) + " |";
      out += "\n";
    }
    if (shown < t.rows.size())
      out += "\n" + std::to_string(t.rows.size() - shown) + " more rows: all of them with `--format csv` or `json`.\n";
    if (!t.note.empty()) out += "\n_" + md_cell(t.note) + "_\n";
  }
  if (!left_out.empty()) out += "\n" + md_cell(left_out) + "\n";
  if (!d.summary.lines.empty()) {
    out += "\n## " + md_cell(d.summary.title) + "\n\n";
    for (const std::string& l : d.summary.lines) out += "- " + md_cell(l) + "\n";
  }
  return out;
}

std::string render_csv(const Document& d) {
  std::string out;
  for (const Table& t : d.tables) out += "# view: " + t.id + "\n" + csv_table(t) + "\n";
  return out;
}

std::vector<std::pair<std::string, std::string>> render_csv_tables(const Document& d) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Table& t : d.tables) out.emplace_back(t.id, csv_table(t));
  return out;
}

}  // namespace traintime::report
