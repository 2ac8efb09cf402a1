// tt_api_v1::collective: a collective run on the CPU (PyTorch's gloo and MPI process groups), as
// traintime.torch timed it, kept per process group (core/cpu_collectives.h). A process whose only
// record is such a collective still writes its rank file.
#include <cerrno>
#include <cstring>

#include "session.h"

namespace traintime::preload {

void api_collective(const tt_collective* c) noexcept {
  Session* s = session();
  if (!s || !c || c->size < sizeof(tt_collective)) return;
  const int saved = errno;
  try {
    core::CpuCollective r;
    r.group = c->group ? c->group : "";
    r.backend = c->backend ? c->backend : "";
    r.group_size = c->group_size;
    r.group_rank = c->group_rank;
    r.op = core::comm_op_from_name(c->op ? std::string_view(c->op) : std::string_view("unknown"));
    if (r.op == core::CommOp::kNone) r.op = core::CommOp::kUnknown;
    r.bytes = c->bytes;
    r.seq = c->seq;
    r.start_ns = c->start_ns;
    r.end_ns = c->end_ns;
    s->recorder.cpu_collectives.record(r);
    if (!s->recorder.activated.load(std::memory_order_acquire)) activate(mono_ns());
  } catch (...) {
    // Out of memory: the collective is not kept; the application goes on.
  }
  errno = saved;
}

}  // namespace traintime::preload
