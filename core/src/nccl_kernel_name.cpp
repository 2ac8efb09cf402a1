#include "traintime/core/nccl_kernel_name.h"

#include <array>
#include <cctype>

namespace traintime::core {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Strips "void " and an Itanium "_Z<len>" prefix, leaving the bare function identifier first.
std::string_view bare_identifier(std::string_view name) {
  if (starts_with(name, "void ")) name.remove_prefix(5);
  if (starts_with(name, "_Z")) {
    std::size_t i = 2;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
    if (i > 2) name.remove_prefix(i);
  }
  return name;
}

constexpr std::array<std::string_view, 3> kPrefixes = {"ncclDevKernel_", "ncclKernel_",
                                                       "ncclSymkDevKernel_"};

}  // namespace

bool is_nccl_kernel(std::string_view name) {
  std::string_view id = bare_identifier(name);
  for (std::string_view p : kPrefixes)
    if (starts_with(id, p)) return true;
  // Any other symmetric-memory entry point (ncclSymk...) is NCCL's as well.
  return starts_with(id, "ncclSymk");
}

CommOp comm_op_from_kernel_name(std::string_view name) {
  std::string_view id = bare_identifier(name);
  std::string_view rest;
  for (std::string_view p : kPrefixes)
    if (starts_with(id, p)) {
      rest = id.substr(p.size());
      break;
    }
  if (rest.empty()) return CommOp::kUnknown;
  // The collective is the first token, ended by '_', '(' or the mangled parameter list (a digit).
  std::size_t end = 0;
  while (end < rest.size() && std::isalpha(static_cast<unsigned char>(rest[end]))) ++end;
  std::string_view coll = rest.substr(0, end);
  if (coll == "AllReduce") return CommOp::kAllReduce;
  if (coll == "AllGather") return CommOp::kAllGather;
  if (coll == "Broadcast") return CommOp::kBroadcast;
  if (coll == "Reduce") return CommOp::kReduce;
  if (coll == "ReduceScatter") return CommOp::kReduceScatter;
  return CommOp::kUnknown;  // SendRecv, Generic and anything newer
}

}  // namespace traintime::core
