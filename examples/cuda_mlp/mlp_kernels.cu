#include "mlp_kernels.h"

#include <cfloat>

#include "check.h"

namespace example {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  // Grid-stride loops cover the rest; 65535 * 16 blocks keeps every SM busy on any size.
  return static_cast<unsigned>(blocks < 65535u * 16u ? (blocks ? blocks : 1) : 65535u * 16u);
}

__device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void init_uniform_kernel(float* w, size_t n, float bound, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float u = (splitmix64(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 40) * (1.0f / 16777216.0f);
    w[i] = (2.f * u - 1.f) * bound;
  }
}

__global__ void fill_kernel(float* p, size_t n, float value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

__global__ void relu_kernel(float* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    x[i] = fmaxf(x[i], 0.f);
}

__global__ void relu_backward_kernel(float* grad, const float* act, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    if (act[i] <= 0.f) grad[i] = 0.f;
}

__device__ float block_reduce(float v, bool is_max, float* shared) {
  for (int off = 16; off > 0; off >>= 1) {
    float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = threadIdx.x < warps ? shared[threadIdx.x] : (is_max ? -FLT_MAX : 0.f);
  if (warp == 0) {
    for (int off = 16; off > 0; off >>= 1) {
      float o = __shfl_xor_sync(0xffffffffu, v, off);
      v = is_max ? fmaxf(v, o) : v + o;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  float r = shared[0];
  __syncthreads();  // shared is reused by the next reduction
  return r;
}

// One block per row.
__global__ void softmax_ce_kernel(const float* logits, const int32_t* labels, float* loss,
                                  float* dlogits, int classes, float inv_rows) {
  __shared__ float shared[32];
  const size_t row = blockIdx.x;
  const float* l = logits + row * classes;
  float* d = dlogits + row * classes;
  float mx = -FLT_MAX;
  for (int c = threadIdx.x; c < classes; c += blockDim.x) mx = fmaxf(mx, l[c]);
  mx = block_reduce(mx, true, shared);
  float sum = 0.f;
  for (int c = threadIdx.x; c < classes; c += blockDim.x) sum += __expf(l[c] - mx);
  sum = block_reduce(sum, false, shared);
  const int y = labels[row];
  const float inv_sum = 1.f / sum;
  for (int c = threadIdx.x; c < classes; c += blockDim.x) {
    float p = __expf(l[c] - mx) * inv_sum;
    d[c] = (p - (c == y ? 1.f : 0.f)) * inv_rows;
  }
  if (threadIdx.x == 0) loss[row] = logf(sum) + mx - l[y];
}

__global__ void adam_kernel(float* param, const float* grad, float* m, float* v, size_t n,
                            float lr, float beta1, float beta2, float eps, float bias1,
                            float bias2, float grad_scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float g = grad[i] * grad_scale;
    float mi = beta1 * m[i] + (1.f - beta1) * g;
    float vi = beta2 * v[i] + (1.f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= lr * (mi / bias1) / (sqrtf(vi / bias2) + eps);
  }
}

__global__ void sgd_kernel(float* param, const float* grad, size_t n, float lr, float grad_scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    param[i] -= lr * grad_scale * grad[i];
}

}  // namespace

void launch_init_uniform(float* w, size_t n, float bound, uint64_t seed, cudaStream_t stream) {
  init_uniform_kernel<<<grid_for(n), kThreads, 0, stream>>>(w, n, bound, seed);
  KERNEL_CHECK();
}

void launch_fill(float* p, size_t n, float value, cudaStream_t stream) {
  fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, n, value);
  KERNEL_CHECK();
}

void launch_relu(float* x, size_t n, cudaStream_t stream) {
  relu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n);
  KERNEL_CHECK();
}

void launch_relu_backward(float* grad, const float* act, size_t n, cudaStream_t stream) {
  relu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(grad, act, n);
  KERNEL_CHECK();
}

void launch_softmax_cross_entropy(const float* logits, const int32_t* labels, float* loss,
                                  float* dlogits, int rows, int classes, cudaStream_t stream) {
  softmax_ce_kernel<<<rows, kThreads, 0, stream>>>(logits, labels, loss, dlogits, classes,
                                                   1.f / rows);
  KERNEL_CHECK();
}

void launch_adam(float* param, const float* grad, float* m, float* v, size_t n, float lr,
                 float beta1, float beta2, float eps, float bias1, float bias2, float grad_scale,
                 cudaStream_t stream) {
  adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(param, grad, m, v, n, lr, beta1, beta2, eps,
                                                    bias1, bias2, grad_scale);
  KERNEL_CHECK();
}

void launch_sgd(float* param, const float* grad, size_t n, float lr, float grad_scale,
                cudaStream_t stream) {
  sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(param, grad, n, lr, grad_scale);
  KERNEL_CHECK();
}

}  // namespace example
