/*
 * Implementation detail of traintime.h: the per-translation-unit dispatch pointer.
 * Do not include this file directly.
 */
#ifndef TRAINTIME_TRAINTIME_H
#error "include <traintime/traintime.h>, not traintime/detail/dispatch.h"
#endif
#ifndef TRAINTIME_DETAIL_DISPATCH_H
#define TRAINTIME_DETAIL_DISPATCH_H

#ifndef _GNU_SOURCE
#define TT_DETAIL_UNDEF_GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#ifdef TT_DETAIL_UNDEF_GNU_SOURCE
#undef _GNU_SOURCE
#undef TT_DETAIL_UNDEF_GNU_SOURCE
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * One pointer per translation unit (like NVTX's per-module tables): NULL means "no profiler",
 * the address of this sentinel "not looked up yet", anything else is the table. Concurrent
 * first calls may both look up; they store the same answer, and the relaxed atomics keep that
 * race defined.
 */
static const char tt_detail_unresolved = 0;
static const tt_api_v1* tt_detail_api_ptr = (const tt_api_v1*)(const void*)&tt_detail_unresolved;

static const tt_api_v1* tt_detail_resolve(void) {
  const tt_api_v1* api = 0;
  void* sym = dlsym(RTLD_DEFAULT, "traintime_get_api_v1");
  if (sym) {
    tt_get_api_v1_fn get = 0;
    /* Object-to-function pointer conversion through memcpy-free union keeps -Wpedantic quiet. */
    union { void* obj; tt_get_api_v1_fn fn; } u;
    u.obj = sym;
    get = u.fn;
    api = get();
  }
  __atomic_store_n(&tt_detail_api_ptr, api, __ATOMIC_RELAXED);
  return api;
}

/*
 * The table, or NULL when not profiled. Without the profiler a call costs one load and one
 * branch that falls through: "no profiler" is NULL itself, so a single test separates it from
 * both the table and the look-up still to come, which are laid out of line.
 */
static inline const tt_api_v1* tt_detail_api(void) {
  const tt_api_v1* api = __atomic_load_n(&tt_detail_api_ptr, __ATOMIC_RELAXED);
  if (__builtin_expect(api == 0, 1)) return 0;
  if (__builtin_expect(api == (const tt_api_v1*)(const void*)&tt_detail_unresolved, 0))
    return tt_detail_resolve();
  return api;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRAINTIME_DETAIL_DISPATCH_H */
