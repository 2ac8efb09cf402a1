// Inside a hung collective (hang_progress.h).
#include "hang_progress.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "render.h"

namespace traintime::report {
namespace {

constexpr uint64_t kUnknown = nccl::ProxyProgress::kUnknown;

bool network(const nccl::ProxyProgress& p) { return p.direction != "kernel"; }

std::string seconds(uint64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", static_cast<double>(ns) / 1e9);
  return b;
}

}  // namespace

std::vector<nccl::ProxyProgress> rows_of_hung(const core::RankFile& f, const std::string& communicator,
                                              const std::string& op) {
  // NCCL numbers each op type of a communicator on its own, from 0: the hung one is the oldest
  // of its type in flight; a collective of another type there is counted only when `op` is not
  // known.
  const nccl::ProxyProgressSection* section = nccl::proxy_progress(f);
  if (section == nullptr) return {};
  uint64_t oldest = kUnknown;
  for (const nccl::ProxyProgress& p : section->rows)
    if (p.communicator == communicator && !p.pxn && (op.empty() || op == core::comm_op_name(p.op)))
      oldest = std::min(oldest, p.nccl_seq);
  std::vector<nccl::ProxyProgress> out;
  for (const nccl::ProxyProgress& p : section->rows)
    if (p.communicator == communicator && !p.pxn && (op.empty() || op == core::comm_op_name(p.op)) &&
        p.nccl_seq == oldest)
      out.push_back(p);
  return out;
}

std::string HangProgress::detail() const {
  std::string out;
  for (const std::string& s : sources) out += (out.empty() ? "" : "+") + s;
  return out.empty() ? "none" : out;
}

void add_rank_progress(HangProgress& p, int64_t rank, std::vector<nccl::ProxyProgress> rows) {
  for (nccl::ProxyProgress& r : rows) {
    p.sources.insert(r.source);
    ChannelProgress c;
    c.rank = rank;
    c.stopped_short = r.steps_done != kUnknown && r.steps_total != kUnknown && r.steps_done > 0 &&
                      r.steps_done < r.steps_total;
    c.row = std::move(r);
    p.rows.push_back(std::move(c));
  }
  std::stable_sort(p.rows.begin(), p.rows.end(), [](const ChannelProgress& a, const ChannelProgress& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (network(a.row) != network(b.row)) return network(a.row);
    return a.row.channel < b.row.channel;
  });
}

namespace {

std::string row_line(const ChannelProgress& c) {
  const nccl::ProxyProgress& r = c.row;
  std::string s = "rank " + std::to_string(c.rank) + " channel " + std::to_string(r.channel);
  if (!network(r)) return s + ": kernel channel never finished (running for " + seconds(r.idle_ns) + ")";
  s += r.direction == "send" ? " send to rank " : " recv from rank ";
  s += std::to_string(r.peer) + ": ";
  if (r.steps_done != kUnknown) {
    s += std::to_string(r.steps_done) + " of " + (r.steps_total != kUnknown ? std::to_string(r.steps_total) : "?") +
         " steps done";
    if (r.bytes_done != kUnknown) s += " (" + bytes_text(static_cast<double>(r.bytes_done)) + ")";
    if (r.steps_posted != kUnknown) s += ", " + std::to_string(r.steps_posted) + " posted";
  } else {
    s += (r.steps_total != kUnknown ? std::to_string(r.steps_total) + " steps, " : std::string()) +
         "steps done n/a (ProxyStep was off)";
  }
  return s + "; in " + r.state + " for " + seconds(r.idle_ns);
}

}  // namespace

std::vector<std::string> progress_lines(const HangProgress& p, std::size_t max) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < p.rows.size() && k < max; ++k) out.push_back(row_line(p.rows[k]));
  if (p.rows.size() > max)
    out.push_back("... " + std::to_string(p.rows.size() - max) + " more channel(s) (--format json lists them all)");
  return out;
}

namespace {

// "3" or "1, 3": the distinct values, in order.
template <typename T>
std::string list_text(const std::set<T>& v) {
  std::string s;
  for (const T& x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

// The network rows whose steps are known (ProxyStep was on for them).
std::vector<const ChannelProgress*> stepped_rows(const HangProgress& p) {
  std::vector<const ChannelProgress*> out;
  for (const ChannelProgress& c : p.rows)
    if (network(c.row) && c.row.steps_done != kUnknown) out.push_back(&c);
  return out;
}

// Where a set of rows is: "channel 3 of ranks 0, 1".
std::string where_text(const std::vector<const ChannelProgress*>& rows) {
  std::set<int64_t> ranks;
  std::set<unsigned> channels;
  for (const ChannelProgress* c : rows) {
    ranks.insert(c->rank);
    channels.insert(c->row.channel);
  }
  return std::string(channels.size() > 1 ? "channels " : "channel ") + list_text(channels) +
         (ranks.size() > 1 ? " of ranks " : " of rank ") + list_text(ranks);
}

}  // namespace

bool stalled_inside(const HangProgress& p) {
  for (const ChannelProgress& c : p.rows)
    if (c.stopped_short && c.row.idle_ns >= kStalledInsideNs) return true;
  return false;
}

std::string stalled_inside_words() {
  return "a transfer inside it moved part way, then not for " + seconds(kStalledInsideNs) + " or more";
}

bool stopped_together(const HangProgress& p) {
  const std::vector<const ChannelProgress*> rows = stepped_rows(p);
  if (rows.size() < 2) return false;
  for (const ChannelProgress* c : rows)
    if (c->row.steps_done != rows.front()->row.steps_done) return false;
  return true;
}

std::string stopped_line(const HangProgress& p) {
  if (p.rows.empty()) return std::string();
  const std::vector<const ChannelProgress*> stepped = stepped_rows(p);
  if (stopped_together(p)) {
    // Nobody is behind: naming one of them would accuse it by the order of the files.
    const nccl::ProxyProgress& r = stepped.front()->row;
    return "stopped together: every transfer in flight (" + where_text(stepped) + ") stopped at " +
           std::to_string(r.steps_done) + " of " +
           (r.steps_total != kUnknown ? std::to_string(r.steps_total) : std::string("?")) +
           " steps done; none is behind the others";
  }
  if (!stepped.empty()) {
    // Behind: the transfer that got least far; of those, a send before a receive (a send that
    // stops starves its peer's receive at the same step), then by rank and channel.
    const ChannelProgress* pick = nullptr;
    for (const ChannelProgress* c : stepped) {
      if (!pick || c->row.steps_done < pick->row.steps_done) {
        pick = c;
        continue;
      }
      if (c->row.steps_done == pick->row.steps_done && c->row.direction == "send" && pick->row.direction != "send")
        pick = c;
    }
    return "stopped moving: " + row_line(*pick);
  }
  std::vector<const ChannelProgress*> net, kernel;
  for (const ChannelProgress& c : p.rows) (network(c.row) ? net : kernel).push_back(&c);
  if (net.size() == 1) return "stopped moving: " + row_line(*net.front());
  if (!net.empty())
    return "stopped: the transfers of " + where_text(net) +
           " never finished; which one stopped first is n/a (ProxyStep was off: no steps)";
  return "never finished: the kernel " + where_text(kernel);
}

}  // namespace traintime::report
