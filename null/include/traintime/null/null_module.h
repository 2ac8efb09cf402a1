// The null module: a template for the next intercepted API family (docs/architecture.md "Where a
// new intercepted API family goes"). Copy null/ (its tests in null/tests/), rename, and replace note_call()
// by the family's wrappers; everything else keeps its shape:
//
//   - its format (null_format.h, core/module_format.h): the section's name and version, its
//     counters as an X-macro list -- the enum the code counts with, each key, and the one
//     function that formats each warning, which traintime-report renders again from the counters
//     -- and its data section (NullData: the rank file's top-level `null`), its own type with
//     its own writer and reader (null_format.cpp, on core/json_read.h's primitives).
//   - its report half, kReport (null_report.cpp, modules/module_report.h): compiled into
//     traintime-report because the file is there; it merges the ranks' data sections into
//     named figures, rows of every output format and names --fail-if takes.
//   - its runtime half, kModule (null_module.cpp, core/module.h), listed once in the module table
//     (modules/include/traintime/modules/module_table.h): configure() is called at start-up and
//     again in a fork child (the child starts clean); what the module needs from the process
//     comes in the ModuleHost, plain function pointers, never as an include of preload/.
//   - the hot path (here note_call()): relaxed atomic counters only -- no lock, no allocation,
//     no string, errno preserved; the first counted call tells the process it has something to
//     write.
//   - state open on a thread (here begin_call()/end_call(): the family's call the thread is
//     inside, as the NCCL wrappers count only the outermost call and NVTX keeps its open
//     ranges): thread-local, and forgotten by configure() in a fork child, where the forking
//     thread is the only one left. A fork made inside an open call must not leave the child
//     inside it: the parent's call ending in the child counts nothing and never makes the child
//     write a file. null/tests's "fork with state open" checks this with a real fork().
//   - section(): the module's part of the rank file (core/section.h), built when the file is
//     written: its typed counters, each warning formatted once from its counter's table entry,
//     and its data (Section::data), which the rank file's writer hands to its format.
#pragma once

#include <cstdint>

#include "traintime/core/section.h"

namespace traintime::null {

struct Hooks {
  // The first counted call since configure(): the process has something to write. Called once,
  // on the calling thread, with errno saved around it.
  void (*on_first_call)() noexcept = nullptr;
};

// Resets the counters, forgets the calling thread's open calls and takes the hooks; `enabled`
// false leaves note_call() counting nothing. Not thread-safe against note_call(): called before
// the application's threads run, and in a fork child, where only the forking thread exists.
void configure(bool enabled, const Hooks& hooks);

// The stand-in for an intercepted call that moved `bytes` and returned `ok`. errno untouched.
void note_call(uint64_t bytes, bool ok) noexcept;

// A wrapper's two halves, for a family whose entry points call each other: begin_call() opens a
// call on this thread and says whether it is the outermost; end_call() closes it, and counts it
// (note_call) when it was the outermost. An end_call() with no call open on this thread (the
// parent's call, in a fork child) does nothing. errno untouched.
bool begin_call() noexcept;
void end_call(uint64_t bytes, bool ok) noexcept;

// Rank file modules.null: counters calls, bytes and failed_calls, with a warning when a call
// failed. Empty (no counters, so no modules.null) until a call was counted: a module that saw
// nothing says nothing.
core::Section section();

}  // namespace traintime::null
