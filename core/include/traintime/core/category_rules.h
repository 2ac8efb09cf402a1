// Category of a region derived from its name (DESIGN §3). Names are registered once, so none of
// this is on a hot path; the registry calls match() the first time it sees a name and handles
// the explicit-category, parent and `other` fallbacks itself.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "traintime/core/category.h"

namespace traintime::core {

// The whole tokens of a region name, lower-cased: split on every non-alphanumeric (ASCII) byte
// and on camelCase boundaries. Digits never split a token on their own ("h2d", "layer3"). A
// capital starts a token after a lower-case letter ("attentionFwd" -> attention, fwd), after
// digits that follow a lower-case letter ("layer3Forward" -> layer3, forward), and when it
// begins a capitalized word after an acronym or digits ("HTTPLoader" -> http, loader;
// "H2DCopy" -> h2d, copy). An all-capitals run with digits stays one token ("H2D" -> h2d).
// So "AllReduce" is two tokens (all, reduce): a rule token "allreduce" matches "allreduce" and
// "ALLREDUCE" but not "AllReduce".
std::vector<std::string> name_tokens(std::string_view name);

// True for a region named exactly "step" (any case): it marks a training step, not the optimizer.
bool is_step_marker(std::string_view name);

// An ordered list of (category, tokens) rules. A name matches a rule when any of its tokens
// equals any of the rule's tokens; the first matching rule, in list order, gives the category.
class CategoryRules {
 public:
  struct Rule {
    Category category = Category::kOther;
    std::vector<std::string> tokens;  // lower-case, alphanumeric
  };

  // forward (forward, fwd), backward (backward, bwd), optimizer (optimizer, optim, adam, sgd),
  // io (io, data, dataloader, load, h2d).
  static CategoryRules defaults();

  // User rules from TRAINTIME_CATEGORY_RULES, tried BEFORE the defaults:
  //   "forward=fwd,forward;io=prefetch,loader"
  // Rules are separated by ';', tokens by ','; spaces around either are ignored, as are empty
  // rules ("a=b;" is fine). Category names: forward, backward, optimizer, comm, io, other (any
  // case). Each token must be one alphanumeric word, because matching is on whole tokens of the
  // name and a token with a separator in it could never match. An empty spec gives the defaults.
  // On error returns nullopt and, when `error` is not null, sets it to a one-line reason.
  static std::optional<CategoryRules> parse(std::string_view spec, std::string* error);

  // The category of the first rule matching `region_name`; nullopt when no rule matches.
  std::optional<Category> match(std::string_view region_name) const;

  const std::vector<Rule>& rules() const { return rules_; }

 private:
  std::vector<Rule> rules_;
};

}  // namespace traintime::core
