// Rank, world size and job id from launcher environments (DESIGN §6): each launcher alone, the
// innermost-launcher-wins precedence, and invalid values falling through to the next source.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "traintime/core/rank_detect.h"

using traintime::core::detect_job_id;
using traintime::core::detect_rank;
using traintime::core::EnvLookup;
using traintime::core::generate_job_id;
using traintime::core::RankInfo;

namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup env_of(const Vars& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

RankInfo rank_of(const Vars& vars) { return detect_rank(env_of(vars)); }

}  // namespace

TEST_CASE("rank without any launcher is rank 0 of a world of 1", "[rank]") {
  const RankInfo r = rank_of({{"HOME", "/root"}});
  CHECK(r.rank == 0);
  CHECK(r.world_size == 1);
  CHECK(r.source.empty());
  CHECK_FALSE(r.from_launcher);
}

TEST_CASE("rank from each launcher's variables alone", "[rank]") {
  struct Case {
    Vars vars;
    int64_t rank, size;
    const char* source;
  };
  const Case cases[] = {
      {{{"RANK", "3"}, {"WORLD_SIZE", "8"}}, 3, 8, "RANK"},
      {{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, 1, 2, "OMPI_COMM_WORLD_RANK"},
      {{{"PMIX_RANK", "5"}, {"SLURM_NTASKS", "6"}}, 5, 6, "PMIX_RANK"},
      {{{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}, 2, 4, "PMI_RANK"},
      {{{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "16"}}, 7, 16, "SLURM_PROCID"},
  };
  for (const Case& c : cases) {
    INFO(c.source);
    const RankInfo r = rank_of(c.vars);
    CHECK(r.rank == c.rank);
    CHECK(r.world_size == c.size);
    CHECK(r.source == c.source);
    CHECK(r.from_launcher);
  }
}

TEST_CASE("rank from Open MPI 4.1's mpirun environment", "[rank]") {
  // What `mpirun -np 2 env` exports on Open MPI 4.1 for rank 1 (PMIx but no PMIX size variable).
  const RankInfo r = rank_of({{"OMPI_COMM_WORLD_RANK", "1"},
                              {"OMPI_COMM_WORLD_SIZE", "2"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                              {"PMIX_RANK", "1"},
                              {"OMPI_MCA_ess_base_vpid", "1"}});
  CHECK(r.rank == 1);
  CHECK(r.world_size == 2);
  CHECK(r.source == "OMPI_COMM_WORLD_RANK");
}

TEST_CASE("rank: torchrun inside srun reports torchrun's rank (innermost wins)", "[rank]") {
  const RankInfo r = rank_of({{"RANK", "9"},
                              {"WORLD_SIZE", "16"},
                              {"SLURM_PROCID", "1"},
                              {"SLURM_NTASKS", "2"}});
  CHECK(r.rank == 9);
  CHECK(r.world_size == 16);
  CHECK(r.source == "RANK");
}

TEST_CASE("rank precedence follows the documented launcher order", "[rank]") {
  Vars all = {{"RANK", "0"},         {"WORLD_SIZE", "1"},       {"OMPI_COMM_WORLD_RANK", "1"},
              {"OMPI_COMM_WORLD_SIZE", "2"}, {"PMIX_RANK", "2"}, {"PMI_RANK", "3"},
              {"PMI_SIZE", "4"},     {"SLURM_PROCID", "4"},     {"SLURM_NTASKS", "5"}};
  CHECK(rank_of(all).source == "RANK");
  all.erase("RANK");
  CHECK(rank_of(all).source == "OMPI_COMM_WORLD_RANK");
  all.erase("OMPI_COMM_WORLD_RANK");
  // PMIX_RANK takes its size from OMPI_COMM_WORLD_SIZE (2): rank 2 is out of range, so it falls
  // back to SLURM_NTASKS (5).
  RankInfo r = rank_of(all);
  CHECK(r.source == "PMIX_RANK");
  CHECK(r.rank == 2);
  CHECK(r.world_size == 5);
  all.erase("PMIX_RANK");
  CHECK(rank_of(all).source == "PMI_RANK");
  all.erase("PMI_RANK");
  r = rank_of(all);
  CHECK(r.source == "SLURM_PROCID");
  CHECK(r.rank == 4);
}

TEST_CASE("rank: invalid values fall through to the next source", "[rank]") {
  const Vars slurm = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}};
  const Vars bad_torchrun[] = {
      {{"RANK", "-1"}, {"WORLD_SIZE", "4"}},   // negative
      {{"RANK", "one"}, {"WORLD_SIZE", "4"}},  // not a number
      {{"RANK", "4"}, {"WORLD_SIZE", "4"}},    // rank >= size
      {{"RANK", "0"}, {"WORLD_SIZE", "0"}},    // empty world
      {{"RANK", "0"}},                         // no size at all
      {{"RANK", ""}, {"WORLD_SIZE", "4"}},     // empty
      {{"RANK", "1 "}, {"WORLD_SIZE", "4"}},   // trailing junk
      {{"RANK", "0"}, {"WORLD_SIZE", "99999999999999999999999"}},  // overflow
  };
  for (Vars vars : bad_torchrun) {
    INFO(vars.begin()->second);
    vars.insert(slurm.begin(), slurm.end());
    const RankInfo r = rank_of(vars);
    CHECK(r.source == "SLURM_PROCID");
    CHECK(r.rank == 1);
    CHECK(r.world_size == 2);
  }
}

TEST_CASE("rank: PMIX_RANK without any size source is skipped", "[rank]") {
  const RankInfo r = rank_of({{"PMIX_RANK", "3"}});
  CHECK_FALSE(r.from_launcher);
  CHECK(r.rank == 0);
  CHECK(r.world_size == 1);
}

TEST_CASE("job id comes from the outermost scheduler first", "[job_id]") {
  Vars vars = {{"SLURM_JOB_ID", "123456"},
               {"TORCHELASTIC_RUN_ID", "rdzv-7"},
               {"OMPI_MCA_ess_base_jobid", "1920991233"},
               {"OMPI_MCA_orte_ess_jobid", "42"},
               {"TRAINTIME_JOB_ID", "tt-1"}};
  CHECK(detect_job_id(env_of(vars)) == "123456");
  vars.erase("SLURM_JOB_ID");
  CHECK(detect_job_id(env_of(vars)) == "rdzv-7");
  vars.erase("TORCHELASTIC_RUN_ID");
  CHECK(detect_job_id(env_of(vars)) == "1920991233");
  vars.erase("OMPI_MCA_ess_base_jobid");
  CHECK(detect_job_id(env_of(vars)) == "42");
  vars.erase("OMPI_MCA_orte_ess_jobid");
  CHECK(detect_job_id(env_of(vars)) == "tt-1");
  vars.erase("TRAINTIME_JOB_ID");
  CHECK(detect_job_id(env_of(vars)).empty());
}

TEST_CASE("job id ignores torchrun's placeholder run id \"none\"", "[job_id]") {
  CHECK(detect_job_id(env_of({{"TORCHELASTIC_RUN_ID", "none"}, {"TRAINTIME_JOB_ID", "tt-2"}})) ==
        "tt-2");
  CHECK(detect_job_id(env_of({{"TORCHELASTIC_RUN_ID", "none"}})).empty());
}

TEST_CASE("job id skips empty variables", "[job_id]") {
  CHECK(detect_job_id(env_of({{"SLURM_JOB_ID", ""}, {"OMPI_MCA_ess_base_jobid", "77"}})) == "77");
}

TEST_CASE("generated job ids are file-name safe and differ between calls", "[job_id]") {
  const std::regex shape("[0-9]{8}T[0-9]{6}Z-[0-9]+-[0-9a-f]{8}");
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    const std::string id = generate_job_id();
    INFO(id);
    CHECK(std::regex_match(id, shape));
    seen.insert(id);
  }
  CHECK(seen.size() == 50);
}
