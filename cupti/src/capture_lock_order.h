// The CUPTI adapter's threads and lock order, in one place: gpu_capture_class.h includes it, so
// every part of GpuCapture does. Each site that flushes CUPTI or waits on the processing thread
// names this file.
//
// Threads: application threads run the launch and resource callbacks (launch_callbacks.cpp);
// CUPTI's threads (or the flushing thread, inside cuptiActivityFlushAll) run the buffer callbacks
// (buffer_callbacks.cpp); one processing thread ingests buffers, flushes periodically and
// publishes live figures (processing_thread.cpp, live_publishing.cpp, device_name.cpp); the exit
// hook and snapshots flush and drain (capture_drain.cpp, capture_summary.cpp).
//
// Lock order, outermost first (never taken in the other order):
//   start_mu_  (start-up only)
//   flush_mu_  -> [CUPTI's internal locks] -> queue_mu_   (FlushAll delivers buffers
//                                                          synchronously into on_completed)
//   agg_mu_    (no hook is called under it: a region's category comes with the launch context,
//               an NCCL group's members are asked between two holds (split_group_kernels),
//               steps and path names before or after)
//   live_mu_, device_mu_, vmm_mu_ (taken by VMM calls' callbacks, and under agg_mu_ by
//   take_vmm) and the GraphNodeTable / BufferPool / FixtureRecorder mutexes are leaves.
// Another CUPTI client sharing CUPTI (client_mux.h): ClientMux::mu_ (the client's own CUPTI
//   calls) -> ClientMux::out_mu_ (its open buffer, also taken inside on_completed, under a flush
//   holding flush_mu_); the client's buffer callbacks run under out_mu_, which is never held
//   while calling CUPTI, and the client's own flush calls CUPTI before taking either.
// queue_mu_ and agg_mu_ are never held together, and neither is held while calling CUPTI.
// The launch callback (application threads) takes no lock at all; the callbacks of CUDA's virtual
// memory calls (cuMemCreate, cuMemMap...: allocator growth, not launches) take vmm_mu_ alone.
#pragma once
