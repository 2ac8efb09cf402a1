// Converting NCCL profiler plugin event descriptors between versions (profiler_plugin_api.h), as
// NCCL's own adapters do (src/plugin/profiler/profiler_vN.cc): every version to v7 (what v7 added
// left zero) and v7 to each older version (an event kind the older version does not have: *known
// = false, nothing to send). Used by simgpu's NCCL, which builds v7 descriptors and calls the
// version a plugin offers, and by libtraintime.so's plugin, which reads every version as v7 and
// passes events on to a chained plugin in its own version.
#pragma once

#include "traintime/nccl/profiler_plugin_api.h"

namespace traintime::nccl_profiler {

namespace convert_detail {
template <typename To, typename From>
void coll_common(To& o, const From& c) {
  o.seq_number = c.seq_number, o.func = c.func, o.send_buff = c.send_buff, o.recv_buff = c.recv_buff;
  o.count = c.count, o.root = c.root, o.datatype = c.datatype, o.n_channels = c.n_channels, o.n_warps = c.n_warps;
  o.algo = c.algo, o.proto = c.proto;
}
template <typename To, typename From>
void p2p_common(To& o, const From& p) {
  o.func = p.func, o.buff = p.buff, o.datatype = p.datatype, o.count = p.count, o.peer = p.peer;
  o.n_channels = p.n_channels;
}
template <typename To, typename From>
void api_common(To& o, const From& d) {
  o.coll_api.func = d.coll_api.func, o.coll_api.count = d.coll_api.count, o.coll_api.datatype = d.coll_api.datatype;
  o.coll_api.root = d.coll_api.root, o.coll_api.stream = d.coll_api.stream;
  o.coll_api.graph_captured = d.coll_api.graph_captured;
}
template <typename To, typename From>
void p2p_api_common(To& o, const From& d) {
  o.p2p_api.func = d.p2p_api.func, o.p2p_api.count = d.p2p_api.count, o.p2p_api.datatype = d.p2p_api.datatype;
  o.p2p_api.stream = d.p2p_api.stream, o.p2p_api.graph_captured = d.p2p_api.graph_captured;
}
}  // namespace convert_detail

// v5 / v6 / v7 -> v5 / v6 / v7: the members the two share (CE events only between v6 and v7).
template <typename To, typename From>
inline To convert_v5_like(const From& d) {
  To o{};
  o.type = d.type, o.parent = d.parent, o.rank = d.rank;
  switch (d.type) {
    case kGroupApi: o.group_api = d.group_api; break;
    case kCollApi: convert_detail::api_common(o, d); break;
    case kP2pApi: convert_detail::p2p_api_common(o, d); break;
    case kKernelLaunch: o.kernel_launch = d.kernel_launch; break;
    case kColl:
      convert_detail::coll_common(o.coll, d.coll);
      o.coll.parent_group = d.coll.parent_group;
      break;
    case kP2p:
      convert_detail::p2p_common(o.p2p, d.p2p);
      o.p2p.parent_group = d.p2p.parent_group;
      break;
    case kProxyOp: o.proxy_op = d.proxy_op; break;
    case kProxyStep: o.proxy_step = d.proxy_step; break;
    case kKernelCh: o.kernel_ch = d.kernel_ch; break;
    case kNetPlugin: o.net_plugin = d.net_plugin; break;
    default: break;
  }
  return o;
}

inline EventDescrV7 to_v7(const EventDescrV7& d) { return d; }
inline EventDescrV7 to_v7(const EventDescrV6& d) { return convert_v5_like<EventDescrV7>(d); }
inline EventDescrV7 to_v7(const EventDescrV5& d) { return convert_v5_like<EventDescrV7>(d); }
inline EventDescrV7 to_v7(const EventDescrV4& d) {
  EventDescrV7 o{};
  o.type = d.type, o.parent = d.parent, o.rank = d.rank;
  switch (d.type) {
    case kColl: convert_detail::coll_common(o.coll, d.coll); break;
    case kP2p: convert_detail::p2p_common(o.p2p, d.p2p); break;
    case kProxyOp: o.proxy_op = d.proxy_op; break;
    case kProxyStep: o.proxy_step = d.proxy_step; break;
    case kKernelCh: o.kernel_ch = d.kernel_ch; break;
    case kNetPlugin: o.net_plugin = d.net_plugin; break;
    default: break;
  }
  return o;
}
inline EventDescrV7 to_v7(const EventDescrV3& d) {
  EventDescrV7 o{};
  o.type = d.type, o.parent = d.parent, o.rank = d.rank;
  switch (d.type) {
    case kColl:
      o.coll.seq_number = d.coll.seq_number, o.coll.func = d.coll.func, o.coll.send_buff = d.coll.send_buff;
      o.coll.recv_buff = d.coll.recv_buff, o.coll.count = d.coll.count, o.coll.root = d.coll.root;
      o.coll.datatype = d.coll.datatype, o.coll.n_channels = d.coll.n_max_channels, o.coll.n_warps = d.coll.n_warps;
      o.coll.algo = d.coll.algo, o.coll.proto = d.coll.proto;
      break;
    case kP2p:
      o.p2p.func = d.p2p.func, o.p2p.buff = d.p2p.buff, o.p2p.datatype = d.p2p.datatype;
      o.p2p.count = d.p2p.count, o.p2p.peer = d.p2p.peer;
      break;
    case kProxyOp: o.proxy_op = d.proxy_op; break;
    case kProxyStep: o.proxy_step = d.proxy_step; break;
    case kKernelCh: o.kernel_ch.channel_id = d.kernel_ch.channel_id; break;
    case kNetPlugin: o.net_plugin = d.net_plugin; break;
    default: break;
  }
  return o;
}

// v7 -> v4: only the kinds v4 has.
inline bool to_v4(const EventDescrV7& d, EventDescrV4* o) {
  if (d.type > kNetPlugin) return false;
  *o = EventDescrV4{};
  o->type = static_cast<uint8_t>(d.type), o->parent = d.parent, o->rank = d.rank;
  switch (d.type) {
    // v4 has no API events and no parent-group field: a task's parent is its Group event.
    case kColl:
      convert_detail::coll_common(o->coll, d.coll);
      if (d.coll.parent_group) o->parent = d.coll.parent_group;
      break;
    case kP2p:
      convert_detail::p2p_common(o->p2p, d.p2p);
      if (d.p2p.parent_group) o->parent = d.p2p.parent_group;
      break;
    case kProxyOp: o->proxy_op = d.proxy_op; break;
    case kProxyStep: o->proxy_step = d.proxy_step; break;
    case kKernelCh: o->kernel_ch = d.kernel_ch; break;
    case kNetPlugin: o->net_plugin = d.net_plugin; break;
    default: break;
  }
  return true;
}

// v7 -> v3: only the kinds v3 has; v3's task events name their communicator themselves.
inline bool to_v3(const EventDescrV7& d, const char* comm_name, uint64_t comm_hash, EventDescrV3* o) {
  if (d.type > kNetPlugin) return false;
  *o = EventDescrV3{};
  o->type = static_cast<uint8_t>(d.type), o->parent = d.parent, o->rank = d.rank;
  switch (d.type) {
    case kColl:
      o->coll.comm_name = comm_name, o->coll.comm_hash = comm_hash, o->coll.seq_number = d.coll.seq_number;
      o->coll.func = d.coll.func, o->coll.send_buff = d.coll.send_buff, o->coll.recv_buff = d.coll.recv_buff;
      o->coll.count = d.coll.count, o->coll.root = d.coll.root, o->coll.datatype = d.coll.datatype;
      o->coll.n_max_channels = d.coll.n_channels, o->coll.n_warps = d.coll.n_warps;
      o->coll.algo = d.coll.algo, o->coll.proto = d.coll.proto;
      break;
    case kP2p:
      o->p2p.comm_name = comm_name, o->p2p.comm_hash = comm_hash, o->p2p.func = d.p2p.func;
      o->p2p.buff = d.p2p.buff, o->p2p.datatype = d.p2p.datatype, o->p2p.count = d.p2p.count;
      o->p2p.peer = d.p2p.peer;
      break;
    case kProxyOp: o->proxy_op = d.proxy_op; break;
    case kProxyStep: o->proxy_step = d.proxy_step; break;
    case kKernelCh: o->kernel_ch.channel_id = d.kernel_ch.channel_id; break;
    case kNetPlugin: o->net_plugin = d.net_plugin; break;
    default: break;
  }
  return true;
}

}  // namespace traintime::nccl_profiler
