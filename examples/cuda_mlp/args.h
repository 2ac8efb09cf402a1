// A tiny "--name value" / "--flag" parser shared by the examples: unknown flags and bad numbers
// stop the program with a message instead of being ignored.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace example {

class Args {
 public:
  Args(int argc, char** argv, const char* usage) : argc_(argc), argv_(argv), usage_(usage) {}

  // Walks the arguments; `on` is called with (name, next-value-or-null) and returns how many
  // values it consumed (0 or 1), or -1 for an unknown name.
  template <class F>
  void parse(F on) {
    for (int i = 1; i < argc_; ++i) {
      std::string a = argv_[i];
      if (a == "-h" || a == "--help") {
        std::printf("%s", usage_);
        std::exit(0);
      }
      const char* next = i + 1 < argc_ ? argv_[i + 1] : nullptr;
      int used = on(a, next);
      if (used < 0) die("unknown option '" + a + "'");
      if (used == 1 && !next) die("option '" + a + "' needs a value");
      i += used;
    }
  }

  long long number(const std::string& name, const char* v, long long lo, long long hi) const {
    if (!v) die("option '" + name + "' needs a value");
    char* end = nullptr;
    long long x = std::strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < lo || x > hi)
      die("option '" + name + "' wants an integer in [" + std::to_string(lo) + ", " +
          std::to_string(hi) + "], got '" + v + "'");
    return x;
  }

  double real(const std::string& name, const char* v) const {
    if (!v) die("option '" + name + "' needs a value");
    char* end = nullptr;
    double x = std::strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(x > 0)) die("option '" + name + "' wants a positive number");
    return x;
  }

  [[noreturn]] void die(const std::string& msg) const {
    std::fprintf(stderr, "%s: %s\n\n%s", argv_[0], msg.c_str(), usage_);
    std::exit(2);
  }

 private:
  int argc_;
  char** argv_;
  const char* usage_;
};

}  // namespace example
