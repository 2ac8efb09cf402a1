// The report's views (docs/report.md): each computes one part of the Report, as a value of its own
// type, from the loaded Job (or from the views before it), in a file of its own; analyze()
// (analysis.cpp) runs them in order and keeps what they return.
// Internal to tools/report: the formats read the Report, never these functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis.h"
#include "job.h"

namespace traintime::report::views {

inline constexpr double kNsPerMs = 1e6;
inline double ms(uint64_t ns) { return static_cast<double>(ns) / kNsPerMs; }

// Nearest-rank percentile of sorted values: the ceil(q*n)-th smallest.
double percentile(const std::vector<double>& sorted, double q);
Dist dist_of(std::vector<double> v);
double median(std::vector<double> v);
// printf of one number.
std::string fmt(const char* f, double v);
// The report's views spell ops as the rank file does.
std::string op_text(core::CommOp op);

// steps_view.cpp: the distributions of step time and its breakdown.
StepView step_view(const Job& job);
// A rank's median step time from the job's step source, after warm-up; without per-step rows,
// the GPU span per step of its totals or its own CPU wall p50.
double rank_step_p50(const core::RankFile& f, bool gpu);

// rank_view.cpp: one rank's row of the per-rank table (the job's step source: gpu).
RankView rank_view(const RankInput& r, bool gpu);

// comm_view.cpp: the comm table, one row per (backend, op, communicator size); and the waits:
// collectives lined up across ranks, each rank's waits, the wait-free bandwidth.
std::vector<CommView> comm_view(const Job& job);
WaitsView waits_view(const Job& job);

// stragglers_view.cpp: from the per-rank rows and the waits (the views analyze() ran before it).
StragglersView stragglers_view(const Report& rep);

// hangs_view.cpp: the collectives the job hangs in.
HangsView hangs_view(const Job& job);

// memory_view.cpp: the ranks' memory headroom, least first.
std::vector<MemoryHeadroom> memory_view(const std::vector<RankView>& per_rank);

// analysis.cpp's tables of the job as a whole: GPU busy per category, the regions and the kernels
// merged over the ranks, largest first.
std::vector<CategoryView> category_view(const Job& job);
std::vector<RegionAcross> region_view(const Job& job);
std::vector<KernelView> kernel_view(const Job& job);

// warnings_view.h: the warnings of the ranks, grouped as they are read (WarningGrouper).

}  // namespace traintime::report::views
