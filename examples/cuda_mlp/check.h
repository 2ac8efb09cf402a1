// Error checks for the CUDA examples: every CUDA, cuBLAS and NCCL call goes through one of these,
// so a failure names the call, the file and line, the library's own message and the rank.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace example {

// Set once the rank is known so that messages from several ranks can be told apart.
inline int& error_rank() {
  static int rank = -1;
  return rank;
}

[[noreturn]] inline void fail(const char* lib, const char* expr, const char* msg, const char* file,
                              int line) {
  std::fprintf(stderr, "[rank %d] %s error: %s\n    in %s\n    at %s:%d\n", error_rank(), lib, msg,
               expr, file, line);
  std::exit(1);
}

}  // namespace example

#define CUDA_CHECK(expr)                                                                   \
  do {                                                                                     \
    cudaError_t tt_err_ = (expr);                                                          \
    if (tt_err_ != cudaSuccess)                                                            \
      ::example::fail("CUDA", #expr, cudaGetErrorString(tt_err_), __FILE__, __LINE__);     \
  } while (0)

#define CUBLAS_CHECK(expr)                                                                 \
  do {                                                                                     \
    cublasStatus_t tt_st_ = (expr);                                                        \
    if (tt_st_ != CUBLAS_STATUS_SUCCESS)                                                   \
      ::example::fail("cuBLAS", #expr, cublasGetStatusString(tt_st_), __FILE__, __LINE__); \
  } while (0)

#define NCCL_CHECK(expr)                                                                   \
  do {                                                                                     \
    ncclResult_t tt_nr_ = (expr);                                                          \
    if (tt_nr_ != ncclSuccess)                                                             \
      ::example::fail("NCCL", #expr, ncclGetErrorString(tt_nr_), __FILE__, __LINE__);      \
  } while (0)

// Kernel launches report configuration errors only through cudaGetLastError.
#define KERNEL_CHECK() CUDA_CHECK(cudaGetLastError())
