// Category of a region from its name (DESIGN §3): whole-token, case-insensitive matching with
// camelCase splitting, default rule order, user rules first, and clear parse errors.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "traintime/core/category_rules.h"

using traintime::core::Category;
using traintime::core::CategoryRules;
using traintime::core::is_step_marker;
using traintime::core::name_tokens;

using Tokens = std::vector<std::string>;

TEST_CASE("name tokens split on separators and camelCase, lower-cased", "[category]") {
  CHECK(name_tokens("attentionFwd") == Tokens{"attention", "fwd"});
  CHECK(name_tokens("HTTPLoader") == Tokens{"http", "loader"});
  CHECK(name_tokens("h2d") == Tokens{"h2d"});
  CHECK(name_tokens("H2D") == Tokens{"h2d"});
  CHECK(name_tokens("H2DCopy") == Tokens{"h2d", "copy"});
  CHECK(name_tokens("layer3Forward") == Tokens{"layer3", "forward"});
  CHECK(name_tokens("layer3FWD") == Tokens{"layer3", "fwd"});
  CHECK(name_tokens("FP16Kernel") == Tokens{"fp16", "kernel"});
  CHECK(name_tokens("copyH2D") == Tokens{"copy", "h2d"});
  CHECK(name_tokens("AllReduce") == Tokens{"all", "reduce"});
  CHECK(name_tokens("Forward") == Tokens{"forward"});
  CHECK(name_tokens("FORWARD") == Tokens{"forward"});
  CHECK(name_tokens("step/forward/layer_3") == Tokens{"step", "forward", "layer", "3"});
  CHECK(name_tokens("  Data-Loader::next ") == Tokens{"data", "loader", "next"});
  CHECK(name_tokens("aten::_foreach_add_") == Tokens{"aten", "foreach", "add"});
  CHECK(name_tokens("").empty());
  CHECK(name_tokens("__--").empty());
  CHECK(name_tokens("caf\xc3\xa9" "Fwd") == Tokens{"caf", "fwd"});  // non-ASCII bytes separate
}

TEST_CASE("default rules categorize the documented tokens", "[category]") {
  const CategoryRules rules = CategoryRules::defaults();
  CHECK(rules.match("forward") == Category::kForward);
  CHECK(rules.match("model_fwd") == Category::kForward);
  CHECK(rules.match("Backward") == Category::kBackward);
  CHECK(rules.match("loss.bwd") == Category::kBackward);
  CHECK(rules.match("optimizer.step") == Category::kOptimizer);
  CHECK(rules.match("optim") == Category::kOptimizer);
  CHECK(rules.match("adam_step") == Category::kOptimizer);
  CHECK(rules.match("SGD") == Category::kOptimizer);
  CHECK(rules.match("io") == Category::kIo);
  CHECK(rules.match("next_data") == Category::kIo);
  CHECK(rules.match("DataLoader") == Category::kIo);  // data, loader
  CHECK(rules.match("dataloader") == Category::kIo);
  CHECK(rules.match("load_batch") == Category::kIo);
  CHECK(rules.match("copyH2D") == Category::kIo);
}

TEST_CASE("default rules match whole tokens only, never substrings", "[category]") {
  const CategoryRules rules = CategoryRules::defaults();
  // "attention" contains "io" and "ten"; "radam" contains "adam"; none may match.
  CHECK(rules.match("attention") == std::nullopt);
  CHECK(rules.match("self_attention") == std::nullopt);
  CHECK(rules.match("radam_like") == std::nullopt);
  CHECK(rules.match("forwarding") == std::nullopt);
  CHECK(rules.match("metadata") == std::nullopt);
  CHECK(rules.match("reload") == std::nullopt);
  CHECK(rules.match("ratio") == std::nullopt);
  CHECK(rules.match("layer3") == std::nullopt);
}

TEST_CASE("default rules try categories in the documented order", "[category]") {
  const CategoryRules rules = CategoryRules::defaults();
  CHECK(rules.match("backward_then_forward") == Category::kForward);
  CHECK(rules.match("adam_bwd") == Category::kBackward);
  CHECK(rules.match("load_optimizer") == Category::kOptimizer);
}

TEST_CASE("a region named exactly step is a step marker, not the optimizer", "[category]") {
  CHECK(is_step_marker("step"));
  CHECK(is_step_marker("STEP"));
  CHECK(is_step_marker("Step"));
  CHECK_FALSE(is_step_marker("steps"));
  CHECK_FALSE(is_step_marker("train_step"));
  CHECK_FALSE(is_step_marker(" step"));
  CHECK(CategoryRules::defaults().match("step") == std::nullopt);
  CHECK(CategoryRules::defaults().match("train_step") == std::nullopt);
}

TEST_CASE("user rules are tried before the defaults", "[category]") {
  std::string error;
  const auto rules = CategoryRules::parse("io = prefetch, Loader ; backward=fwd", &error);
  REQUIRE(rules);
  CHECK(error.empty());
  CHECK(rules->match("prefetchBatch") == Category::kIo);
  CHECK(rules->match("HTTPLoader") == Category::kIo);
  CHECK(rules->match("attention_fwd") == Category::kBackward);  // user rule beats default
  CHECK(rules->match("forward") == Category::kForward);          // defaults still apply
  CHECK(rules->match("attention") == std::nullopt);
}

TEST_CASE("user rules may name comm and other", "[category]") {
  const auto rules = CategoryRules::parse("comm=allreduce,ddp;other=logging", nullptr);
  REQUIRE(rules);
  CHECK(rules->match("ddp_sync") == Category::kComm);
  CHECK(rules->match("nccl.ALLREDUCE") == Category::kComm);
  CHECK(rules->match("AllReduce") == std::nullopt);  // two tokens: all, reduce
  CHECK(rules->match("logging_fwd") == Category::kOther);
}

TEST_CASE("empty or separator-only rule specs give the defaults", "[category]") {
  for (const char* spec : {"", " ", ";", " ; ;"}) {
    std::string error;
    const auto rules = CategoryRules::parse(spec, &error);
    REQUIRE(rules);
    CHECK(rules->rules().size() == CategoryRules::defaults().rules().size());
    CHECK(rules->match("fwd") == Category::kForward);
  }
}

TEST_CASE("rule spec errors say what is wrong", "[category]") {
  struct Case {
    const char* spec;
    const char* expected;
  };
  const Case cases[] = {
      {"fwd", "rule \"fwd\" has no '='"},
      {"forwards=fwd", "unknown category \"forwards\""},
      {"unattributed=x", "unknown category \"unattributed\""},
      {"io=", "category io has no tokens"},
      {"io= , ", "category io has no tokens"},
      {"io=pre fetch", "token \"pre fetch\" of category io is not one alphanumeric word"},
      {"io=pre_fetch", "token \"pre_fetch\""},
      {"forward=fwd;io", "rule \"io\" has no '='"},
  };
  for (const Case& c : cases) {
    INFO(c.spec);
    std::string error;
    CHECK_FALSE(CategoryRules::parse(c.spec, &error));
    CHECK(error.find(c.expected) != std::string::npos);
  }
}
