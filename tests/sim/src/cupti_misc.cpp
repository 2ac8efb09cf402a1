// SIMULATION: the rest of the fake libcupti.so.13 — engine hook installation, version, ids of
// contexts/streams/graphs, and cuptiFinalize.
#include <mutex>

#include "cupti_state.h"

namespace simcupti {

namespace {
const simgpu_tool_hooks kHooks = {on_api_enter, on_api_exit, on_work, on_resource, on_memory};
}

void ensure_hooks() {
  static std::once_flag once;
  std::call_once(once, [] { simgpu_set_tool_hooks(&kHooks); });
}

// Loading CUPTI is enough for it to see the driver (as the real one attaches on load).
__attribute__((constructor)) static void install_on_load() { ensure_hooks(); }

}  // namespace simcupti

using namespace simcupti;

extern "C" {

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = api_version();  // the record layouts written are the ones of this version
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetLastError(void) { return CUPTI_SUCCESS; }

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t* contextId) {
  if (!contextId) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context && context != simgpu_context()) return CUPTI_ERROR_INVALID_CONTEXT;
  *contextId = simgpu_context_id();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t* deviceId) {
  if (!deviceId) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context && context != simgpu_context()) return CUPTI_ERROR_INVALID_CONTEXT;
  *deviceId = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetStreamId(CUcontext, CUstream stream, uint32_t* streamId) {
  if (!streamId) return CUPTI_ERROR_INVALID_PARAMETER;
  *streamId = simgpu_stream_id(stream);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetGraphNodeId(CUgraphNode node, uint64_t* nodeId) {
  if (!node || !nodeId) return CUPTI_ERROR_INVALID_PARAMETER;
  *nodeId = simgpu_graph_node_id(node);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetGraphId(CUgraph graph, uint32_t* pId) {
  if (!graph || !pId) return CUPTI_ERROR_INVALID_PARAMETER;
  *pId = simgpu_graph_id(graph);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetGraphExecId(CUgraphExec graphExec, uint32_t* pId) {
  if (!graphExec || !pId) return CUPTI_ERROR_INVALID_PARAMETER;
  *pId = simgpu_graph_exec_id(graphExec);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiFinalize(void) {
  // Like CUPTI: detach from the process; undelivered records stay undelivered.
  reset_activity();
  reset_callbacks();
  return CUPTI_SUCCESS;
}

}  // extern "C"
