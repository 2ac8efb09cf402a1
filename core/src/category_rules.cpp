#include "traintime/core/category_rules.h"

#include <algorithm>

#include "ascii_text.h"

namespace traintime::core {
namespace {

using ascii::is_alnum;
using ascii::is_digit;
using ascii::is_lower;
using ascii::is_upper;
using ascii::lower;
using ascii::to_lower;
using ascii::trim;

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

}  // namespace

std::vector<std::string> name_tokens(std::string_view name) {
  std::vector<std::string> tokens;
  std::string current;
  const auto flush = [&] {
    if (!current.empty()) tokens.push_back(std::move(current));
    current.clear();
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!is_alnum(c)) {
      flush();
      continue;
    }
    if (is_upper(c) && !current.empty()) {
      const char prev = name[i - 1];
      const bool next_lower = i + 1 < name.size() && is_lower(name[i + 1]);
      // After digits, the case of the letter before them decides: "layer3Fwd" splits,
      // "H2D" (an acronym with a digit in it) does not.
      std::size_t j = i;
      while (j > 0 && is_digit(name[j - 1])) --j;
      const bool digits_after_lower = j < i && j > 0 && is_lower(name[j - 1]);
      if (is_lower(prev) || (next_lower && (is_upper(prev) || is_digit(prev))) ||
          digits_after_lower)
        flush();
    }
    current.push_back(to_lower(c));
  }
  flush();
  return tokens;
}

bool is_step_marker(std::string_view name) { return name.size() == 4 && lower(name) == "step"; }

CategoryRules CategoryRules::defaults() {
  CategoryRules r;
  r.rules_ = {
      {Category::kForward, {"forward", "fwd"}},
      {Category::kBackward, {"backward", "bwd"}},
      {Category::kOptimizer, {"optimizer", "optim", "adam", "sgd"}},
      {Category::kIo, {"io", "data", "dataloader", "load", "h2d"}},
  };
  return r;
}

std::optional<CategoryRules> CategoryRules::parse(std::string_view spec, std::string* error) {
  const auto fail = [&](std::string why) -> std::optional<CategoryRules> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  CategoryRules result;
  for (std::string_view item : split(spec, ';')) {
    item = trim(item);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return fail("rule \"" + std::string(item) + "\" has no '=' (expected category=token,...)");
    const std::string cat_name = lower(trim(item.substr(0, eq)));
    const std::optional<Category> cat = category_from_name(cat_name);
    if (!cat || *cat == Category::kUnattributed)
      return fail("unknown category \"" + cat_name +
                  "\" (expected forward, backward, optimizer, comm, io or other)");
    Rule rule{*cat, {}};
    for (std::string_view token : split(item.substr(eq + 1), ',')) {
      token = trim(token);
      if (token.empty()) continue;
      if (!std::all_of(token.begin(), token.end(), is_alnum))
        return fail("token \"" + std::string(token) + "\" of category " + cat_name +
                    " is not one alphanumeric word (names are matched on whole tokens)");
      rule.tokens.push_back(lower(token));
    }
    if (rule.tokens.empty()) return fail("category " + cat_name + " has no tokens");
    result.rules_.push_back(std::move(rule));
  }
  const CategoryRules defaults_rules = defaults();
  result.rules_.insert(result.rules_.end(), defaults_rules.rules_.begin(),
                       defaults_rules.rules_.end());
  return result;
}

std::optional<Category> CategoryRules::match(std::string_view region_name) const {
  const std::vector<std::string> tokens = name_tokens(region_name);
  for (const Rule& rule : rules_)
    for (const std::string& t : tokens)
      if (std::find(rule.tokens.begin(), rule.tokens.end(), t) != rule.tokens.end())
        return rule.category;
  return std::nullopt;
}

}  // namespace traintime::core
