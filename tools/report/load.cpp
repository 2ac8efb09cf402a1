// Reading a job's rank files: the directory listing, parsing on every core through the project's
// one rank-file reader (core/rank_file_json.h), and the merge of the region rows as files arrive,
// so memory holds one batch of whole files plus the merged aggregates.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "job.h"
#include "rank_fates.h"
#include "traintime/core/rank_file_json.h"
#include "traintime/core/module_format.h"

namespace traintime::report {

void Across::add(double v, int64_t rank) {
  if (n == 0 || v < min) {
    min = v;
    min_rank = rank;
  }
  if (n == 0 || v > max) {
    max = v;
    max_rank = rank;
  }
  sum += v;
  ++n;
}

double Across::spread_pct() const {
  const double m = mean();
  return m > 0 ? (max - min) / m * 100.0 : 0.0;
}

namespace {

namespace fs = std::filesystem;

enum class Kind { kRankFile, kRecord, kTrace, kOther };

// What to check when a job left no rank file where it was looked for.
const std::string kWhyNoRankFiles =
    "is the job still running (a rank writes its file when it ends, rank-*.live while it runs, snapshots every "
    "TRAINTIME_SNAPSHOT_SEC)? was it started with LD_PRELOAD=.../libtraintime.so (mpirun: -x LD_PRELOAD)? did it "
    "record anything (a region, a step, CUDA work or an NCCL call; a job that records nothing ends with one "
    "\"traintime: nothing was recorded\" line)? was TRAINTIME_OUTPUT set to another folder?";

Kind kind_of(const std::string& name) {
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (name.rfind("rank-", 0) != 0) return Kind::kOther;
  if (ends_with(".trace.json")) return Kind::kTrace;
  if (ends_with(".json")) return Kind::kRankFile;
  if (ends_with(".live")) return Kind::kRecord;
  return Kind::kOther;
}

// One rank's input: its rank file, the always-current record (core/live_record.h) a process
// that never finished left beside it, or both (when a snapshot or a suspected-hang file was
// written before the process was killed).
struct Input {
  std::string file;    // rank-*.json, else the record
  std::string record;  // rank-*.live beside the rank file; empty when none (or `file` is it)
};

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ull << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  return buf;
}

struct Parsed {
  std::optional<core::RankFile> file;
  core::ReadError error;  // without a file: why (its detail is the problem's line after "path: ")
  std::string record;  // the record it was read from, when parse_input chose the record
};

// What identifies one version of a file for the parse cache.
struct FileKey {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileKey& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
};

}  // namespace

struct ParseCache::Impl {
  struct Entry {
    FileKey key;
    std::shared_ptr<const Parsed> parsed;  // as load_job keeps it
    uint64_t seen = 0;  // the load that last found the file
  };
  mutable std::mutex mu;
  std::unordered_map<std::string, Entry> entries;
  uint64_t load = 0;
  uint64_t hits = 0;

  std::shared_ptr<const Parsed> find(const std::string& path, const FileKey& key) {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = entries.find(path);
    if (it == entries.end() || !(it->second.key == key)) return nullptr;
    it->second.seen = load;
    ++hits;
    return it->second.parsed;
  }
  void put(const std::string& path, const FileKey& key, const Parsed& p) {
    auto copy = std::make_shared<const Parsed>(p);
    std::lock_guard<std::mutex> lock(mu);
    entries[path] = Entry{key, std::move(copy), load};
  }
  // Files not found by this load (deleted, renamed away) are forgotten.
  void forget_unseen() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = entries.begin(); it != entries.end();) it = it->second.seen == load ? std::next(it) : entries.erase(it);
  }
};

ParseCache::ParseCache() : impl_(std::make_unique<Impl>()) {}
ParseCache::~ParseCache() = default;
std::size_t ParseCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->entries.size();
}
uint64_t ParseCache::hits() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->hits;
}

std::optional<core::ReadError> check_before_read(const std::string& path, uint64_t max_bytes, struct stat* st) {
  using Kind = core::ReadError::Kind;
  if (::stat(path.c_str(), st) != 0)
    return core::ReadError{Kind::kUnreadable, path, "cannot read: " + std::error_code(errno, std::generic_category()).message()};
  if (!S_ISREG(st->st_mode)) return core::ReadError{Kind::kNotRegular, path, "not a regular file; skipped"};
  const uint64_t size = static_cast<uint64_t>(st->st_size);
  if (size == 0)
    return core::ReadError{Kind::kEmpty, path, "empty file (a rank file is never empty: was it truncated?); skipped"};
  if (size > max_bytes)
    return core::ReadError{Kind::kTooLarge, path,
                           human_bytes(size) + ", larger than a rank file can be (limit " + human_bytes(max_bytes) +
                               "); skipped without reading"};
  return std::nullopt;
}

namespace {

// One file read; through `cache` (when given) unless it is a record.
Parsed parse_one(const std::string& path, uint64_t max_bytes, ParseCache* cache) {
  Parsed p;
  struct stat st {};
  if (std::optional<core::ReadError> refused = check_before_read(path, max_bytes, &st)) {
    p.error = std::move(*refused);
    return p;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // A record changes in place (its mapping's stores need not move its mtime): never cached.
  if (cache && kind_of(fs::path(path).filename().string()) == Kind::kRecord) cache = nullptr;
  const FileKey key{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), size,
                    static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  if (cache)
    if (std::shared_ptr<const Parsed> hit = cache->impl().find(path, key)) return *hit;
  p.file = core::read_rank_file(path, &p.error);
  if (cache) cache->impl().put(path, key, p);
  return p;
}

// A rank file and the record beside it: the one holding more finished steps (the record's
// step counters are current to the last step; the file's GPU figures are complete only in a
// final file, and a final file never has a record beside it). The file on a tie.
Parsed parse_input(const Input& in, uint64_t max_bytes, ParseCache* cache) {
  Parsed file = parse_one(in.file, max_bytes, cache);
  if (in.record.empty()) return file;
  Parsed record = parse_one(in.record, max_bytes, cache);
  if (!record.file) return file;
  if (!file.file || record.file->steps.count > file.file->steps.count) {
    record.record = in.record;
    return record;
  }
  return file;
}

// What is kept of one job while the files stream in.
struct JobAcc {
  std::vector<RankInput> ranks;
  std::map<int64_t, std::string> file_of_rank;
  std::map<std::string, RegionAcross> regions;
  std::map<std::string, KernelAcross> kernels;
  ModuleCountersAcross modules;
  ModuleMerges module_merges;  // the modules' report halves
  std::vector<std::string> aux_files;
  std::vector<std::string> files;  // every file of this job, for the "other job" lines
  std::vector<Problem> problems;
  std::map<int64_t, uint64_t> world_sizes;  // world_size -> files
  std::filesystem::file_time_type newest{};  // the latest modification of its files (--latest)
};

// Merges the file's regions into the job's and empties them; returns its top-level regions' CPU
// time per step (RankInput::top_cpu_ms).
std::vector<std::pair<std::string, double>> merge_regions(JobAcc& acc, core::RankFile& f) {
  const double steps = steps_of(f);
  std::vector<std::pair<std::string, double>> top;
  for (core::RegionRow& r : f.regions) {
    if (top_level_region(r.path)) top.emplace_back(r.path, static_cast<double>(r.cpu_ns) / 1e6 / steps);
    auto [it, fresh] = acc.regions.try_emplace(r.path);
    RegionAcross& ra = it->second;
    if (fresh) {
      ra.path = r.path;
      ra.category = std::string(core::category_name(r.category));
    }
    ra.gpu_busy_ms.add(static_cast<double>(r.gpu_busy_ns) / 1e6 / steps, f.rank);
    ra.cpu_ms.add(static_cast<double>(r.cpu_ns) / 1e6 / steps, f.rank);
    ra.entries.add(static_cast<double>(r.count) / steps, f.rank);
    for (const core::KernelStat& k : r.top_kernels) {
      KernelAcross& ka = acc.kernels[k.name];
      ka.count += k.count;
      ka.gpu_sum_ns += k.gpu_sum_ns;
      ka.per_step_ms_sum += static_cast<double>(k.gpu_sum_ns) / 1e6 / steps;
      if (ka.last_rank != f.rank) {
        ka.last_rank = f.rank;
        ++ka.ranks;
      }
    }
  }
  f.regions.clear();
  f.regions.shrink_to_fit();
  return top;
}

// Adds the file's module counters to the job's, typed: nothing read from a warning's text. The
// rank keeps only the sections that counted a warning, which analysis renders from them
// (core/module_format.h module_formats): the others would be memory held per rank for nothing.
void merge_modules(JobAcc& acc, core::RankFile& f) {
  for (auto it = f.modules.begin(); it != f.modules.end();) {
    auto& merged = acc.modules[it->first];
    const core::ModuleFormat* format = core::find_module_format(it->first);
    bool warned = format == nullptr;  // a newer writer's module: kept as it is
    for (const auto& [key, v] : it->second.counters) {
      merged[key].add(v, f.rank);
      if (v != 0 && !warned) {
        const core::CounterSpec* spec = format->find(key);
        warned = spec != nullptr && spec->message != nullptr;
      }
    }
    it = warned ? std::next(it) : f.modules.erase(it);
  }
}

void accept(JobAcc& acc, const std::string& path, core::RankFile&& f) {
  acc.files.push_back(path);
  if (f.role != core::Role::kRank) {
    acc.aux_files.push_back(path + " (role " + std::string(core::role_name(f.role)) + ", rank " + std::to_string(f.rank) +
                            ", pid " + std::to_string(f.pid) + ", host " + f.host + ")");
    return;
  }
  if (f.world_size < 1 || f.rank < 0 || f.rank >= f.world_size) {
    acc.problems.push_back({path, "rank " + std::to_string(f.rank) + " is outside 0.." +
                                      std::to_string(f.world_size - 1) +
                                      " (its world_size); left out"});
    return;
  }
  const auto dup = acc.file_of_rank.find(f.rank);
  if (dup != acc.file_of_rank.end()) {
    acc.problems.push_back({path, "duplicate: rank " + std::to_string(f.rank) +
                                      " was already read from " + dup->second + "; left out"});
    return;
  }
  acc.file_of_rank[f.rank] = path;
  ++acc.world_sizes[f.world_size];
  std::vector<std::pair<std::string, double>> top = merge_regions(acc, f);
  acc.module_merges.merge(f);
  merge_modules(acc, f);
  acc.ranks.push_back({path, std::move(f), std::nullopt, std::move(top)});
}

class Progress {
 public:
  Progress(bool enabled, std::size_t total) : enabled_(enabled), total_(total) {}
  void update(std::size_t done) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\rtraintime-report: read %zu of %zu rank files", done, total_);
    std::fflush(stderr);
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r%60s\r", "");
  }

 private:
  bool enabled_;
  std::size_t total_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = start_;
};

// Folders below `dir` (at most 4 levels down) that hold rank files, sorted.
std::vector<std::string> folders_with_rank_files(const std::string& dir) {
  std::set<std::string> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it.depth() >= 4) it.disable_recursion_pending();
    if (it.depth() > 0 && kind_of(it->path().filename().string()) == Kind::kRankFile)
      found.insert(it->path().parent_path().string());
  }
  return {found.begin(), found.end()};
}

// The folder of the job asked for: `given`, or the folder of the rank file it names; nullopt (a
// problem said in job) when it is neither.
std::optional<std::string> job_folder(const std::string& given, Job& job) {
  std::string dir = given;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    job.problems.push_back({dir, "no such directory (give the folder the rank files were written to, "
                                 "TRAINTIME_OUTPUT or traintime-out/): " + kWhyNoRankFiles});
    return std::nullopt;
  }
  if (!fs::is_directory(dir, ec)) {
    if (kind_of(fs::path(dir).filename().string()) != Kind::kRankFile) {
      job.problems.push_back({dir, "neither a folder nor a rank file (give the folder that holds the rank-*.json "
                                   "files, or one of them)"});
      return std::nullopt;
    }
    // A rank file's path: its job, from the folder it sits in.
    dir = fs::path(dir).parent_path().string();
    if (dir.empty()) dir = ".";
    job.dir = dir;
  }
  return dir;
}

// The rank files and records of the folder, a record paired with the rank file of the same name;
// the traces into job.trace_files. Listing problems go to job.problems; nullopt: it cannot be listed.
std::optional<std::vector<Input>> list_inputs(const std::string& dir, Job& job) {
  std::error_code ec;
  std::vector<std::string> files, records;
  fs::directory_iterator it(dir, ec), end;
  if (ec) {
    job.problems.push_back({dir, "cannot list: " + ec.message()});
    return std::nullopt;
  }
  for (; it != end; it.increment(ec)) {
    if (ec) {
      job.problems.push_back({dir, "listing stopped: " + ec.message()});
      break;
    }
    const std::string name = it->path().filename().string();
    const Kind k = kind_of(name);
    if (k == Kind::kRankFile) files.push_back(it->path().string());
    if (k == Kind::kRecord) records.push_back(it->path().string());
    if (k == Kind::kTrace) job.trace_files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<Input> inputs;
  for (const std::string& f : files) inputs.push_back({f, {}});
  for (const std::string& r : records) {
    const std::string json = r.substr(0, r.size() - 5) + ".json";
    const auto at = std::lower_bound(files.begin(), files.end(), json);
    if (at != files.end() && *at == json)
      inputs[static_cast<std::size_t>(at - files.begin())].record = r;
    else
      inputs.push_back({r, {}});
  }
  std::sort(inputs.begin(), inputs.end(), [](const Input& a, const Input& b) { return a.file < b.file; });
  std::sort(job.trace_files.begin(), job.trace_files.end());
  job.files_seen = inputs.size();
  return inputs;
}

// No rank file in the folder, and not one folder below with some: say where to look.
void no_rank_files(const std::string& dir, const std::vector<std::string>& below, Job& job) {
  if (below.empty()) {
    job.problems.push_back({dir, "no rank files (rank-*.json) in this directory or below it: " + kWhyNoRankFiles});
  } else {
    std::string list;
    for (std::size_t k = 0; k < below.size() && k < 8; ++k) list += (k ? ", " : "") + below[k];
    if (below.size() > 8) list += " and " + std::to_string(below.size() - 8) + " more";
    job.problems.push_back({dir, "no rank files here, but " + std::to_string(below.size()) +
                                     " folders below it have some: " + list +
                                     "; give one of them, e.g. traintime-report " + below[0]});
  }
}

// What the reader kept reading past (a module section newer than it knows), by line: the first
// file that had it and how many did.
using ReadNotes = std::map<std::string, std::pair<std::string, std::size_t>>;

// One line per kind among the problems, naming the first file and how many more had it.
void report_read_notes(const ReadNotes& notes, Job& job) {
  for (const auto& [note, at] : notes)
    job.problems.push_back({at.first, note + (at.second > 1 ? " (and " + std::to_string(at.second - 1) +
                                                                  " more files)"
                                                            : std::string())});
}

// One parsed input merged into the job it belongs to (or named as left out).
void merge_one(Parsed& p, const Input& input, const LoadOptions& options, Job& job, std::map<std::string, JobAcc>& jobs,
               ReadNotes& notes) {
  const std::string& path = p.record.empty() ? input.file : p.record;
  if (!p.file) {
    job.problems.push_back({path, p.error.detail});  // the problem's line names the file itself
  } else if (options.job && p.file->job_id != *options.job) {
    ++job.other_jobs[p.file->job_id];
    job.problems.push_back({path, "job \"" + p.file->job_id + "\", not the job asked for (--job " +
                                      *options.job + "); left out"});
  } else {
    const std::string id = p.file->job_id;
    JobAcc& acc = jobs[id];
    if (options.latest) {
      std::error_code ec;
      const auto written = std::filesystem::last_write_time(path, ec);
      if (!ec && written > acc.newest) acc.newest = written;
    }
    for (std::string& note : p.file->read_notes) {
      auto& [first, count] = notes[std::move(note)];
      if (count++ == 0) first = path;
    }
    accept(acc, path, std::move(*p.file));
  }
}

// Every input parsed and merged, in file-name order, into the jobs they belong to.
void parse_and_merge(const std::vector<Input>& inputs, const LoadOptions& options, Job& job,
                     std::map<std::string, JobAcc>& jobs) {
  unsigned threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, 16);
  Progress progress(options.progress, inputs.size());

  // `threads` workers parse files into a window of slots, at most `window` files ahead of the
  // merge; this thread merges them in file-name order as they become ready, so the result never
  // depends on thread timing and memory holds at most `window` whole files.
  const std::size_t n = inputs.size();
  const std::size_t window = static_cast<std::size_t>(threads) * 16;
  std::vector<Parsed> slots(std::min(window, n));
  std::vector<char> ready(slots.size(), 0);
  std::mutex mu;
  std::condition_variable slot_ready, slot_free;
  std::size_t claimed = 0, merged = 0;
  auto worker = [&] {
    for (;;) {
      std::size_t i;
      {
        std::unique_lock<std::mutex> lock(mu);
        slot_free.wait(lock, [&] { return claimed >= n || claimed < merged + slots.size(); });
        if (claimed >= n) return;
        i = claimed++;
      }
      Parsed p = parse_input(inputs[i], options.max_file_bytes, options.cache);
      {
        std::lock_guard<std::mutex> lock(mu);
        slots[i % slots.size()] = std::move(p);
        ready[i % slots.size()] = 1;
      }
      slot_ready.notify_all();
    }
  };
  ReadNotes notes;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads && t < n; ++t) pool.emplace_back(worker);
  for (std::size_t i = 0; i < n; ++i) {
    Parsed p;
    {
      std::unique_lock<std::mutex> lock(mu);
      slot_ready.wait(lock, [&] { return ready[i % slots.size()] != 0; });
      p = std::move(slots[i % slots.size()]);
      ready[i % slots.size()] = 0;
      merged = i + 1;
    }
    slot_free.notify_all();
    merge_one(p, inputs[i], options, job, jobs, notes);
    progress.update(i + 1);
  }
  for (std::thread& t : pool) t.join();
  report_read_notes(notes, job);
}

// The job reported: the one asked for, else the one written last (--latest), else the one with
// the most rank files; the files of the others named as left out.
JobAcc& choose_job(std::map<std::string, JobAcc>& jobs, const LoadOptions& options, Job& job) {
  auto chosen = jobs.begin();
  for (auto j = jobs.begin(); j != jobs.end(); ++j)
    if (options.latest ? j->second.newest > chosen->second.newest
                       : j->second.ranks.size() > chosen->second.ranks.size())
      chosen = j;
  const char* why = options.latest ? "whose files were written last" : "which has the most rank files";
  for (auto& [id, acc] : jobs) {
    if (id == chosen->first) continue;
    job.other_jobs[id] += acc.files.size();
    for (const std::string& file : acc.files)
      job.problems.push_back({file, "job \"" + id + "\", not the job reported (\"" + chosen->first + "\", " + why +
                                        "); left out (--job " + id + " reports it)"});
  }
  job.job_id = chosen->first;
  return chosen->second;
}

// The chosen job's merged figures into job: its ranks by rank, its world size, the ranks missing.
void finish_job(JobAcc& acc, Job& job) {
  for (Problem& p : acc.problems) job.problems.push_back(std::move(p));
  job.aux_files = std::move(acc.aux_files);
  job.regions = std::move(acc.regions);
  job.kernels = std::move(acc.kernels);
  job.modules = std::move(acc.modules);
  job.module_figures = acc.module_merges.figures();
  job.ranks = std::move(acc.ranks);
  std::sort(job.ranks.begin(), job.ranks.end(),
            [](const RankInput& a, const RankInput& b) { return a.data.rank < b.data.rank; });
  // The world size most files agree on; a file that disagrees is named but still merged.
  uint64_t votes = 0;
  for (const auto& [ws, n] : acc.world_sizes)
    if (n > votes) {
      votes = n;
      job.world_size = ws;
    }
  for (RankInput& r : job.ranks)
    if (r.data.snapshot) r.running = process_running(r.data);
  for (const RankInput& r : job.ranks)
    if (r.data.world_size != job.world_size)
      job.problems.push_back({r.file, "world_size " + std::to_string(r.data.world_size) + " differs from " +
                                          std::to_string(job.world_size) +
                                          " in the other rank files of the job; merged anyway"});
  std::set<int64_t> present;
  for (const RankInput& r : job.ranks) present.insert(r.data.rank);
  for (int64_t r = 0; r < job.world_size; ++r)
    if (!present.count(r)) job.missing_ranks.push_back(r);
}

}  // namespace

Job load_job(const std::string& given, const LoadOptions& options) {
  Job job;
  job.dir = given;
  const std::optional<std::string> folder = job_folder(given, job);
  if (!folder) return job;
  const std::string& dir = *folder;
  job.dir = dir;
  const std::optional<std::vector<Input>> listed = list_inputs(dir, job);
  if (!listed) return job;
  const std::vector<Input>& inputs = *listed;
  if (options.cache) {
    std::lock_guard<std::mutex> lock(options.cache->impl().mu);
    ++options.cache->impl().load;
  }
  if (inputs.empty()) {
    // traintime-out/ after the demo holds traintime-out/demo/: look below for job folders.
    const std::vector<std::string> below = folders_with_rank_files(dir);
    if (below.size() == 1) return load_job(below[0], options);
    no_rank_files(dir, below, job);
    return job;
  }
  std::map<std::string, JobAcc> jobs;
  parse_and_merge(inputs, options, job, jobs);
  if (options.cache) options.cache->impl().forget_unseen();
  if (jobs.empty()) return job;
  finish_job(choose_job(jobs, options, job), job);
  return job;
}

}  // namespace traintime::report
