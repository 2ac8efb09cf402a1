// A synthetic but realistic stream of GPU activities for the ingest and memory benchmarks: a
// data-parallel step of a transformer-like model, repeated. One chunk of kChunkSteps steps is
// built once; pass p replays it shifted by p chunks in time, step index, region entry,
// correlation id and collective sequence number, so steps keep advancing as in a long run and
// the aggregator's open-step window folds exactly as it would in production.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traintime/core/activity.h"
#include "traintime/core/category.h"

namespace traintime::bench {

class SyntheticWorkload {
 public:
  static constexpr uint32_t kChunkSteps = 64;
  static constexpr uint32_t kLayers = 8;
  static constexpr uint32_t kBuckets = 4;  // AllReduce buckets per step

  SyntheticWorkload() {
    for (uint32_t l = 0; l < kLayers; ++l) {
      // Distinct instantiations per layer shape, as cuBLAS picks a different GEMM per shape.
      names_.push_back("_Z11gemm_kernelILi" + std::to_string(64 << (l % 4)) + "EEvPKfS1_Pfiii");
      names_.push_back("_Z15gelu_fwd_kernelILi" + std::to_string(l) + "EEvPKfPfi");
      names_.push_back("_Z16layernorm_kernelILi" + std::to_string(l) + "EEvPKfPfi");
      names_.push_back("_Z15gemm_bwd_kernelILi" + std::to_string(64 << (l % 4)) + "EEvPKfS1_Pfiii");
      names_.push_back("_Z15gelu_bwd_kernelILi" + std::to_string(l) + "EEvPKfS0_Pfi");
      names_.push_back("_Z20layernorm_bwd_kernelILi" + std::to_string(l) + "EEvPKfPfi");
    }
    names_.push_back("_Z11adam_kernelPfPKfS_S_fi");
    names_.push_back("_Z11loss_kernelPKfPfi");
    names_.push_back("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    names_.push_back("_Z13stray_kernelv");
    build();
  }
  // Activities point into names_: a copy would point into the original.
  SyntheticWorkload(const SyntheticWorkload&) = delete;
  SyntheticWorkload& operator=(const SyntheticWorkload&) = delete;

  size_t size() const { return acts_.size(); }
  uint64_t chunk_span_ns() const { return chunk_span_; }
  uint64_t kernels_per_chunk() const { return kernels_; }

  // Activity i of pass p.
  void get(size_t i, uint64_t pass, core::GpuActivity* a, core::LaunchContext* c,
           core::Category* region_category) const {
    *a = acts_[i];
    *c = ctxs_[i];
    *region_category = cats_[i];
    const uint64_t t = pass * chunk_span_;
    a->start_ns += t;
    a->end_ns += t;
    a->correlation_id += static_cast<uint32_t>(pass * acts_.size() * 2);
    c->step += static_cast<uint32_t>(pass * kChunkSteps);
    c->entry += pass * entries_;
    if (c->comm.seq) c->comm.seq += pass * kChunkSteps * kBuckets;
  }

  const core::GpuActivity& activity(size_t i) const { return acts_[i]; }
  const core::LaunchContext& context(size_t i) const { return ctxs_[i]; }
  core::Category category(size_t i) const { return cats_[i]; }

 private:
  // Region paths as the registry would intern them (any stable ids do).
  static constexpr core::PathId kIo = 1, kForward = 2, kBackward = 3, kOptimizer = 4, kLayer0 = 10;

  void add(core::ActivityKind kind, uint32_t stream, uint64_t dur, core::PathId path,
           core::Category cat, uint32_t step, const std::string* name, core::CopyKind copy = core::CopyKind::kNone,
           uint64_t bytes = 0) {
    core::GpuActivity a;
    a.kind = kind;
    uint64_t& cursor = stream == 1 ? compute_t_ : comm_t_;
    a.start_ns = cursor + 1500;  // launch gaps
    a.end_ns = a.start_ns + dur;
    cursor = a.end_ns;
    a.device = 0;
    a.stream = stream;
    a.correlation_id = static_cast<uint32_t>(2 * acts_.size() + 1);
    a.copy_kind = copy;
    a.bytes = bytes;
    if (name) a.name = *name;
    core::LaunchContext c;
    c.path = path;
    c.step = step;
    c.entry = entry_;
    if (kind == core::ActivityKind::kKernel) ++kernels_;
    acts_.push_back(a);
    ctxs_.push_back(c);
    cats_.push_back(cat);
  }

  void build() {
    using K = core::ActivityKind;
    using C = core::Category;
    const std::string* adam = &names_[kLayers * 6];
    const std::string* loss = adam + 1;
    const std::string* nccl = adam + 2;
    const std::string* stray = adam + 3;
    uint64_t seq = 0;
    compute_t_ = comm_t_ = 1'700'000'000'000'000'000ull;
    for (uint32_t s = 0; s < kChunkSteps; ++s) {
      ++entry_;
      add(K::kMemcpy, 1, 330'000, kIo, C::kIo, s, nullptr, core::CopyKind::kHtoD, 8u << 20);
      add(K::kMemcpy, 1, 11'000, kIo, C::kIo, s, nullptr, core::CopyKind::kHtoD, 256u << 10);
      for (uint32_t l = 0; l < kLayers; ++l) {
        ++entry_;
        for (uint32_t k = 0; k < 3; ++k)
          add(K::kKernel, 1, 20'000 + 9'000 * k + 1'000 * l, kLayer0 + l, C::kForward, s, &names_[l * 6 + k]);
      }
      ++entry_;
      add(K::kKernel, 1, 12'000, kForward, C::kForward, s, loss);
      ++entry_;
      for (uint32_t l = kLayers; l-- > 0;) {
        for (uint32_t k = 3; k < 6; ++k)
          add(K::kKernel, 1, 40'000 + 7'000 * k, kBackward, C::kBackward, s, &names_[l * 6 + k]);
        if (l % (kLayers / kBuckets) == 0) {
          if (comm_t_ < compute_t_ - 60'000) comm_t_ = compute_t_ - 60'000;  // overlaps backward
          add(K::kKernel, 2, 150'000, kBackward, C::kBackward, s, nccl);
          core::LaunchContext& c = ctxs_.back();
          c.comm.op = core::CommOp::kAllReduce;
          c.comm.comm_id = 1;
          c.comm.seq = ++seq;
          c.comm.bytes = 16u << 20;
        }
      }
      ++entry_;
      if (compute_t_ < comm_t_) compute_t_ = comm_t_;
      add(K::kMemcpy, 1, 1'100, kOptimizer, C::kOptimizer, s, nullptr, core::CopyKind::kDtoH, 4);
      for (uint32_t k = 0; k < 4; ++k) add(K::kKernel, 1, 30'000, kOptimizer, C::kOptimizer, s, adam);
      add(K::kMemset, 1, 9'000, kOptimizer, C::kOptimizer, s, nullptr, core::CopyKind::kNone, 64u << 20);
      add(K::kKernel, 1, 3'000, core::kNoPath, C::kOther, s, stray);  // nothing open: unattributed
      compute_t_ += 50'000;  // host-side gap before the next step
    }
    chunk_span_ = compute_t_ + 1'000'000 - 1'700'000'000'000'000'000ull;
    entries_ = entry_ + 1;
  }

  std::vector<std::string> names_;  // stable storage: activities point into it
  std::vector<core::GpuActivity> acts_;
  std::vector<core::LaunchContext> ctxs_;
  std::vector<core::Category> cats_;
  uint64_t compute_t_ = 0, comm_t_ = 0, chunk_span_ = 0, kernels_ = 0, entry_ = 0, entries_ = 0;
};

}  // namespace traintime::bench
