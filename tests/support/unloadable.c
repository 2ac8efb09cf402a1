/* A module for tests/support/test_loader.cpp to load and unload: a string literal in its
 * read-only data, and a writable array. */
static char writable_text[] = "writable";

const char* unloadable_literal(void) { return "read-only literal"; }
char* unloadable_writable(void) { return writable_text; }
