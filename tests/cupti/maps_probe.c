/* Test helper, LD_PRELOADed next to libtraintime.so into sim_train (tests/cupti).
 * TT_PROBE_PRELOAD_CUPTI=<path>: dlopen that libcupti at start-up, as PyTorch does with the one its
 *   wheel ships, before CUDA is initialised.
 * TT_PROBE_DIR=<dir>: at exit, write <dir>/maps-<pid>.txt listing every distinct mapped file
 *   whose path contains "libcupti", one per line (only in processes named sim_train). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_sim_train(void) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = '\0';
  const char* base = strrchr(exe, '/');
  return strcmp(base ? base + 1 : exe, "sim_train") == 0;
}

__attribute__((constructor)) static void probe_start(void) {
  const char* cupti = getenv("TT_PROBE_PRELOAD_CUPTI");
  if (cupti && *cupti && is_sim_train() && !dlopen(cupti, RTLD_NOW | RTLD_GLOBAL))
    fprintf(stderr, "maps_probe: cannot load %s: %s\n", cupti, dlerror());
}

__attribute__((destructor)) static void probe_exit(void) {
  const char* dir = getenv("TT_PROBE_DIR");
  if (!dir || !*dir || !is_sim_train()) return;
  char out_path[PATH_MAX];
  snprintf(out_path, sizeof out_path, "%s/maps-%d.txt", dir, (int)getpid());
  FILE* maps = fopen("/proc/self/maps", "r");
  FILE* out = fopen(out_path, "w");
  if (!maps || !out) {
    if (maps) fclose(maps);
    if (out) fclose(out);
    return;
  }
  char line[4096], seen[16][PATH_MAX];
  int nseen = 0;
  while (fgets(line, sizeof line, maps)) {
    char* path = strchr(line, '/');
    if (!path || !strstr(path, "libcupti")) continue;
    path[strcspn(path, "\n")] = '\0';
    int known = 0;
    for (int i = 0; i < nseen; ++i) known |= strcmp(seen[i], path) == 0;
    if (!known && nseen < 16) {
      snprintf(seen[nseen++], PATH_MAX, "%s", path);
      fprintf(out, "%s\n", path);
    }
  }
  fclose(maps);
  fclose(out);
}
