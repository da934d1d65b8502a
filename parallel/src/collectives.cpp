#include "collectives.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <map>

namespace dcpp::detail {

namespace {

std::string where(const CollectiveContext& context) {
  return context.wrapper + ": rank " + std::to_string(context.group->getRank()) + " of " +
         std::to_string(context.group->getSize());
}

void wait(const CollectiveContext& context, const c10::intrusive_ptr<c10d::Work>& work,
          const std::string& what) {
  try {
    work->wait();
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& error) {
    fail(ErrorKind::kRankFailed, context,
         what + " failed (a peer died or timed out?): " + error.what());
  }
}

}  // namespace

void fail(ErrorKind kind, const CollectiveContext& context, const std::string& message) {
  throw CheckpointError(kind, where(context) + ": " + message);
}

std::vector<FlatGroup> group_by_dtype(const std::vector<at::Tensor>& tensors) {
  std::map<at::ScalarType, std::vector<std::size_t>> by_dtype;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    by_dtype[tensors[i].scalar_type()].push_back(i);
  }
  std::vector<FlatGroup> groups;
  for (auto& [dtype, members] : by_dtype) {
    std::vector<at::Tensor> pieces;
    pieces.reserve(members.size());
    for (std::size_t i : members) {
      pieces.push_back(tensors[i].reshape({-1}));
    }
    groups.push_back({at::cat(pieces), std::move(members)});
  }
  return groups;
}

void broadcast_tensors(const CollectiveContext& context, const std::vector<at::Tensor>& tensors,
                       int root, const std::string& what) {
  for (FlatGroup& group : group_by_dtype(tensors)) {
    std::vector<at::Tensor> buffers{group.flat};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    wait(context, context.group->broadcast(buffers, options), "broadcast of " + what);
    int64_t offset = 0;
    for (std::size_t i : group.members) {
      const at::Tensor& tensor = tensors[i];
      tensor.copy_(group.flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }
}

void allreduce_sum(const CollectiveContext& context, at::Tensor& flat, const std::string& what) {
  std::vector<at::Tensor> buffers{flat};
  wait(context, context.group->allreduce(buffers), "allreduce of " + what);
}

std::vector<at::Tensor> allgather(const CollectiveContext& context, const at::Tensor& flat,
                                  const std::string& what) {
  std::vector<at::Tensor> inputs{flat};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < context.group->getSize(); ++r) {
    outputs[0].push_back(at::empty_like(flat));
  }
  wait(context, context.group->allgather(outputs, inputs), "allgather of " + what);
  return outputs[0];
}

void send(const CollectiveContext& context, at::Tensor tensor, int peer, int tag,
          const std::string& what) {
  std::vector<at::Tensor> buffers{tensor.contiguous()};
  wait(context, context.group->send(buffers, peer, tag),
       "sending " + what + " to rank " + std::to_string(peer));
}

void recv(const CollectiveContext& context, at::Tensor& tensor, int peer, int tag,
          const std::string& what) {
  std::vector<at::Tensor> buffers{tensor};
  wait(context, context.group->recv(buffers, peer, tag),
       "receiving " + what + " from rank " + std::to_string(peer));
}

}  // namespace dcpp::detail
