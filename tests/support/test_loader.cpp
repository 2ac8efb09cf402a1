#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <memory>
#include <string>

#include "traintime/support/loader.h"

using traintime::support::in_read_only_segment;
using traintime::support::loaded_object_adds;
using traintime::support::loaded_object_subs;

namespace {

const char kLiteral[] = "a literal of this program";
char g_writable[] = "a writable array";
char g_zeroed[64];  // .bss: inside the writable segment's memory, past its file bytes

int a_function() { return 7; }

}  // namespace

TEST_CASE("read-only segments: code and literals are, the data, heap and stack are not", "[loader]") {
  CHECK(in_read_only_segment(kLiteral));
  CHECK(in_read_only_segment("a string literal"));
  CHECK(in_read_only_segment(reinterpret_cast<const void*>(&a_function)));
  CHECK_FALSE(in_read_only_segment(g_writable));
  CHECK_FALSE(in_read_only_segment(g_zeroed));
  const auto heap = std::make_unique<char[]>(16);
  CHECK_FALSE(in_read_only_segment(heap.get()));
  char stack[16] = "on the stack";
  CHECK_FALSE(in_read_only_segment(stack));
  CHECK_FALSE(in_read_only_segment(nullptr));
}

TEST_CASE("an unloaded object is counted, and its literals stop being read-only memory", "[loader]") {
  const unsigned long long adds = loaded_object_adds();
  const unsigned long long subs = loaded_object_subs();
  void* module = dlopen(UNLOADABLE_MODULE, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(module != nullptr);
  CHECK(loaded_object_adds() == adds + 1);
  using Text = const char* (*)();
  const auto literal = reinterpret_cast<Text>(dlsym(module, "unloadable_literal"));
  const auto writable = reinterpret_cast<Text>(dlsym(module, "unloadable_writable"));
  REQUIRE(literal != nullptr);
  REQUIRE(writable != nullptr);
  const char* text = literal();
  CHECK(std::string(text) == "read-only literal");
  CHECK(in_read_only_segment(text));
  CHECK_FALSE(in_read_only_segment(writable()));
  CHECK(loaded_object_subs() == subs);
  REQUIRE(dlclose(module) == 0);
  CHECK(loaded_object_subs() == subs + 1);
  // The address is no longer any loaded object's (only compared, never read).
  CHECK_FALSE(in_read_only_segment(text));
}

TEST_CASE("the loader queries leave errno alone", "[loader]") {
  errno = EAGAIN;
  (void)loaded_object_subs();
  (void)in_read_only_segment(kLiteral);
  (void)in_read_only_segment(g_writable);
  CHECK(errno == EAGAIN);
}
