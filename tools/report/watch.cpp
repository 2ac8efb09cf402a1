// traintime-report DIR --watch [SECONDS] (docs/report.md): the job's newest rank files (the
// periodic snapshots of a running job, TRAINTIME_SNAPSHOT_SEC) read again every interval into one
// terminal screen. It only reads files the job writes by atomic rename, so it never blocks the
// job and never sees half a file.
#include "watch.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "render.h"

namespace traintime::report {
namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::string f3(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

std::string ranks_text(const std::vector<int64_t>& ranks, std::size_t most = 8) {
  std::string s;
  for (std::size_t k = 0; k < ranks.size() && k < most; ++k) s += (k ? ", " : "") + std::to_string(ranks[k]);
  if (ranks.size() > most) s += " and " + std::to_string(ranks.size() - most) + " more";
  return s;
}

// Keeps the terminal in single-key mode (no echo, no line buffering) while watching, so `q`
// stops it at once; restored on every way out.
class KeyInput {
 public:
  KeyInput() {
    if (!::isatty(STDIN_FILENO) || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~KeyInput() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  // Waits up to `seconds`; true when `q` was pressed or a signal asked to stop.
  bool wait_for_quit(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!g_stop) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      if (!active_) {
        ::poll(nullptr, 0, static_cast<int>(std::min<long long>(left.count(), 200)));
        continue;
      }
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 200))) > 0) {
        char c = 0;
        if (::read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) return true;
      }
    }
    return true;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

}  // namespace

bool every_rank_final(const Job& job) {
  if (job.ranks.empty() || !job.missing_ranks.empty()) return false;
  for (const RankInput& r : job.ranks)
    if (r.data.snapshot || r.file.size() < 5 || r.file.compare(r.file.size() - 5, 5, ".json") != 0) return false;
  return true;
}

std::string hang_key(const Hang& h) { return h.communicator + "#" + std::to_string(h.seq); }

std::size_t terminal_width() {
  winsize ws{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    const long n = std::strtol(c, nullptr, 10);
    if (n >= 20 && n <= 10000) return static_cast<std::size_t>(n);
  }
  return 0;
}

std::string fit_width(const std::string& screen, std::size_t width) {
  if (width == 0) return screen;
  std::string out;
  std::size_t pos = 0;
  while (pos < screen.size()) {
    std::size_t nl = screen.find('\n', pos);
    if (nl == std::string::npos) nl = screen.size();
    std::string line = screen.substr(pos, nl - pos);
    pos = nl + 1;
    const std::size_t indent = line.find_first_not_of(' ') == std::string::npos ? 0 : line.find_first_not_of(' ');
    const std::string more(std::min<std::size_t>(indent + 2, width / 2), ' ');
    bool first = true;
    while (display_width(line) > width) {
      // The last space within the width (after the indent), else a cut at the width itself.
      std::size_t cut = std::string::npos, cols = 0, at = 0;
      for (std::size_t k = 0; k < line.size() && cols <= width; ++k) {
        if ((static_cast<unsigned char>(line[k]) & 0xC0) == 0x80) continue;
        if (line[k] == ' ' && k > (first ? indent : more.size())) cut = k;
        at = k;
        ++cols;
      }
      if (cut == std::string::npos) cut = at;
      std::string head = line.substr(0, cut);
      while (!head.empty() && head.back() == ' ') head.pop_back();
      out += head + "\n";
      line = more + line.substr(line[cut] == ' ' ? cut + 1 : cut);
      first = false;
    }
    out += line + "\n";
  }
  return out;
}

std::string watch_screen(const Job& job, const Report& r, double interval_s, const std::set<std::string>* before) {
  std::string s;
  char when[32] = "";
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&now));
  s += "traintime-report --watch " + job.dir + "   " + when +
       (interval_s > 0 ? "   every " + f3(interval_s).substr(0, f3(interval_s).find('.') + 2) + " s   (q or Ctrl-C quits)"
                       : std::string()) +
       "\n";
  if (job.ranks.empty()) return s + "no rank file readable yet in " + job.dir + "\n";
  std::size_t running = 0, died = 0;
  for (const RankFate& f : r.fates) (f.running() ? running : died) += 1;
  s += "job " + r.job_id + ": " + std::to_string(r.ranks) + " of " + std::to_string(r.world_size) + " ranks (" +
       std::to_string(running) + " running, " + std::to_string(died) + " died, " +
       std::to_string(r.ranks - running - died) + " finished)" +
       (r.missing_ranks.empty() ? "" : "; no file yet: rank(s) " + ranks_text(r.missing_ranks)) + "\n";
  // A dead rank before anything else: the diagnosis' own words.
  const Document d = build_document(r, Extras{});
  for (const Section& sec : d.diagnosis)
    if (sec.title == "Ranks that died")
      for (const std::string& line : sec.lines) s += "DIED: " + line + "\n";

  // Step reached per rank: the range, and the ranks behind.
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const RankView& v : r.per_rank) {
    lo = std::min(lo, v.steps);
    hi = std::max(hi, v.steps);
  }
  std::vector<int64_t> behind;
  for (const RankView& v : r.per_rank)
    if (v.steps == lo && lo != hi) behind.push_back(v.rank);
  s += "step reached: " + (lo == hi ? std::to_string(hi) + " on every rank"
                                     : std::to_string(lo) + ".." + std::to_string(hi) + "; behind at step " +
                                           std::to_string(lo) + ": rank(s) " + ranks_text(behind)) +
       "\n";

  // Step time p50 and the slowest ranks.
  s += std::string("step time p50 (") + r.steps.step_source() + "): " + f3(r.steps.reference_ms()) + " ms";
  std::vector<const RankView*> slow;
  for (const RankView& v : r.per_rank)
    if (v.step_p50_ms > 0) slow.push_back(&v);
  std::stable_sort(slow.begin(), slow.end(), [](const RankView* a, const RankView* b) { return a->step_p50_ms > b->step_p50_ms; });
  if (!slow.empty()) {
    s += "; slowest:";
    for (std::size_t k = 0; k < slow.size() && k < 5; ++k)
      s += " rank " + std::to_string(slow[k]->rank) + " " + f3(slow[k]->step_p50_ms) + " ms" + (k + 1 < std::min<std::size_t>(5, slow.size()) ? "," : "");
  }
  s += "\n";
  if (r.steps.gpu)
    s += "exposed comm p50: " + f3(r.steps.exposed_comm.p50) + " ms per step (" +
         f3(r.steps.exposed_comm_pct.p50).substr(0, f3(r.steps.exposed_comm_pct.p50).size() - 2) + " % of the step)\n";
  s += self_cost_watch_line(r.self_cost);

  // A hang, first of all: the collective some ranks wait in while others never entered it.
  for (const Hang& h : r.hangs.found) {
    const bool held = !before || before->count(hang_key(h));
    s += std::string(held ? "HANG: " : "possible hang (first seen now; a hang if still there at the next read): ") +
         h.op + " seq " + std::to_string(h.seq) + " on communicator " + h.communicator + ": rank(s) " +
         ranks_text(h.waiting_ranks) + " wait in it" +
         (held && before ? " for more than " + f3(interval_s).substr(0, f3(interval_s).find('.') + 2) + " s" : "") +
         (h.all_entered ? std::string("; every rank entered it") +
                              (h.stalled_inside ? "; " + stalled_inside_words() : std::string())
                        : "; never entered: " + (h.missing_ranks.empty()
                                                     ? std::to_string(h.missing.size()) + " member(s) without a rank file"
                                                     : "rank(s) " + ranks_text(h.missing_ranks))) + "\n";
    // Inside it, live: the channel and peer that stopped moving, and the channels of every rank.
    if (const std::string stopped = stopped_line(h.progress); !stopped.empty()) s += "  " + stopped + "\n";
    for (const std::string& line : progress_lines(h.progress, 4)) s += "    " + line + "\n";
  }

  // The diagnosis so far (stragglers, hangs, ...), as the text report says it.
  for (const Section& sec : d.diagnosis) {
    s += "\n" + sec.title + "\n";
    for (const std::string& line : sec.lines) s += "  " + line + "\n";
  }
  return s;
}

int run_watch(const std::string& dir, const LoadOptions& options, double interval_s, bool once) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  if (!once) {
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
  }
  const bool screen = !once && ::isatty(STDOUT_FILENO);
  KeyInput keys;
  LoadOptions quiet = options;
  quiet.progress = false;
  // Most files have not changed since the last read: those are not parsed again (job.h).
  ParseCache cache;
  quiet.cache = &cache;
  std::set<std::string> seen;  // the hangs of the previous read
  for (;;) {
    const Job job = load_job(dir, quiet);
    const Report r = analyze(job);
    std::string text = fit_width(watch_screen(job, r, once ? 0 : interval_s, once ? nullptr : &seen), terminal_width());
    seen.clear();
    for (const Hang& h : r.hangs.found) seen.insert(hang_key(h));
    const bool done = every_rank_final(job);
    if (done && !once) text += "\nevery rank wrote its final file: the job ended\n";
    if (screen) text = "\033[H\033[2J" + text;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (once || done) return 0;
    if (keys.wait_for_quit(interval_s)) return 0;
  }
}

}  // namespace traintime::report
