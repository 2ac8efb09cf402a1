// CUDA-event timing of single-stream regions, kept beside traintime's annotations so one run
// yields both measurements of the same work.
//
// An event recorded at a region's begin and end on the region's stream brackets exactly the
// stream work queued in between. Recording is asynchronous; READING (cudaEventElapsedTime) needs
// both events complete, so read_step() is called only once a step's work is done: after the loop,
// or after each step with --sync-every-step.
// This check therefore synchronises where traintime does not: traintime needs no sync at all.
#pragma once

#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "check.h"

namespace example {

class RegionEvents {
 public:
  // `unused[r]`: region r is never entered in this run (cuda_mlp --no-nccl has no comm): its
  // events are never recorded, so they are never read either (reading one fails).
  RegionEvents(std::vector<std::string> paths, int steps, cudaStream_t stream,
               std::vector<bool> unused = {})
      : paths_(std::move(paths)), steps_(steps), stream_(stream), unused_(std::move(unused)),
        events_(paths_.size() * static_cast<size_t>(steps) * 2) {
    unused_.resize(paths_.size(), false);
    for (cudaEvent_t& e : events_) CUDA_CHECK(cudaEventCreate(&e));
  }
  ~RegionEvents() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  RegionEvents(const RegionEvents&) = delete;
  RegionEvents& operator=(const RegionEvents&) = delete;

  void begin(int region, int step) { CUDA_CHECK(cudaEventRecord(at(region, step, 0), stream_)); }
  void end(int region, int step) { CUDA_CHECK(cudaEventRecord(at(region, step, 1), stream_)); }

  const std::vector<std::string>& paths() const { return paths_; }

  // Milliseconds of every region in one step; waits for its events (a synchronisation).
  std::vector<double> read_step(int step) const {
    std::vector<double> ms;
    for (size_t r = 0; r < paths_.size(); ++r) {
      float v = 0.f;
      if (unused_[r]) {
        ms.push_back(0.0);
        continue;
      }
      CUDA_CHECK(cudaEventSynchronize(at(static_cast<int>(r), step, 1)));
      CUDA_CHECK(cudaEventElapsedTime(&v, at(static_cast<int>(r), step, 0),
                                      at(static_cast<int>(r), step, 1)));
      ms.push_back(v);
    }
    return ms;
  }

 private:
  cudaEvent_t at(int region, int step, int edge) const {
    return events_[(static_cast<size_t>(region) * steps_ + step) * 2 + edge];
  }

  std::vector<std::string> paths_;
  int steps_;
  cudaStream_t stream_;
  std::vector<bool> unused_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace example
