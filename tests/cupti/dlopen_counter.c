/* Test helper, LD_PRELOADed after libtraintime.so: counts the dlopen(RTLD_NOLOAD) probes for
 * libcuda.so.1 that the lazy GPU-capture start makes, and writes the count to $TT_DLOPEN_COUNT_OUT
 * at exit. Every call is passed on to the real dlopen unchanged. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_ulong g_probes;

void* dlopen(const char* file, int flags) {
  static void* (*real)(const char*, int);
  if (!real) real = (void* (*)(const char*, int))dlsym(RTLD_NEXT, "dlopen");
  if (file && strstr(file, "libcuda.so.1") && (flags & RTLD_NOLOAD)) atomic_fetch_add(&g_probes, 1);
  return real(file, flags);
}

__attribute__((destructor)) static void write_count(void) {
  const char* out = getenv("TT_DLOPEN_COUNT_OUT");
  if (!out) return;
  FILE* f = fopen(out, "w");
  if (!f) return;
  fprintf(f, "%lu\n", (unsigned long)atomic_load(&g_probes));
  fclose(f);
}
