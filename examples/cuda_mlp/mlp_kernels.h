// The custom kernels of the MLP example (the GEMMs are cuBLAS). Each launcher queues one kernel
// on `stream` and checks the launch; none synchronises.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace example {

// He-uniform weights from a counter-based hash, so every rank starts from the same parameters
// without a broadcast.
void launch_init_uniform(float* w, size_t n, float bound, uint64_t seed, cudaStream_t stream);
void launch_fill(float* p, size_t n, float value, cudaStream_t stream);

// x = max(x, 0) in place.
void launch_relu(float* x, size_t n, cudaStream_t stream);
// grad = act > 0 ? grad : 0, where act is the ReLU's output.
void launch_relu_backward(float* grad, const float* act, size_t n, cudaStream_t stream);

// Row-wise softmax cross-entropy of logits [rows x classes]: loss[r] per row and
// dlogits = (softmax - onehot(label)) / rows, the mean loss's gradient.
void launch_softmax_cross_entropy(const float* logits, const int32_t* labels, float* loss,
                                  float* dlogits, int rows, int classes, cudaStream_t stream);

// One Adam step over a flat parameter buffer; grad_scale averages a summed AllReduce.
// bias1 = 1 - beta1^t and bias2 = 1 - beta2^t come from the host, so no step counter lives on
// the device.
void launch_adam(float* param, const float* grad, float* m, float* v, size_t n, float lr,
                 float beta1, float beta2, float eps, float bias1, float bias2, float grad_scale,
                 cudaStream_t stream);
void launch_sgd(float* param, const float* grad, size_t n, float lr, float grad_scale,
                cudaStream_t stream);

}  // namespace example
