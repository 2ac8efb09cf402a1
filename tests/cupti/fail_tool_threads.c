/* LD_PRELOADed after libtraintime.so by test_sim_capture.py: every thread libtraintime.so tries
 * to create fails with EAGAIN (a process at its thread limit), while the application's own
 * threads start as usual. GPU capture must then give up cleanly; the program must not notice. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

typedef int (*create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  static create_fn real = NULL;
  if (real == NULL) real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
  Dl_info info;
  if (dladdr(__builtin_return_address(0), &info) != 0 && info.dli_fname != NULL &&
      strstr(info.dli_fname, "libtraintime") != NULL)
    return EAGAIN;
  return real(thread, attr, start, arg);
}
