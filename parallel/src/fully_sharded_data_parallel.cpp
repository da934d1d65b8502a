#include <dcpp/parallel/fully_sharded_data_parallel.h>

#include "collectives.h"
#include "layer_groups.h"
#include "module_tensors.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <map>

namespace dcpp {

namespace {

const char* const kFullyShardedName = "FullyShardedDataParallel";

int64_t row_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) {
    n *= shape[d];
  }
  return n;
}

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(
    std::shared_ptr<torch::nn::Module> module, c10::intrusive_ptr<c10d::ProcessGroup> process_group,
    c10::intrusive_ptr<c10d::ProcessGroup> replicate_group)
    : module_(std::move(module)),
      group_(std::move(process_group)),
      replicate_group_(std::move(replicate_group)) {
  if (module_ == nullptr || !group_) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "FullyShardedDataParallel: the module and the process group must not be null");
  }
  detail::refuse_tensor_parallel_layers(*module_, kFullyShardedName);
  detail::GroupCalls calls(group_, kFullyShardedName);
  if (replicate_group_) {
    detail::GroupCalls replicas(replicate_group_, kFullyShardedName);
    detail::replicate_group_check(
        replicas, kFullyShardedName, detail::ShardGroupVerdict{calls.rank(), calls.size(), ""},
        "shard", "replicate",
        "on a DeviceMesh {\"replicate\", \"shard\"}: FullyShardedDataParallel(model, "
        "mesh.group(\"shard\"), mesh.group(\"replicate\"))");
  }
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> all;
  for (detail::NamedTensor& named : detail::module_tensors(*module_)) {
    Entry entry;
    entry.fqn = std::move(named.fqn);
    entry.module_tensor = named.tensor;
    entry.shard = named.tensor;
    entry.is_buffer = named.is_buffer;
    entry.sharded = !named.is_buffer && named.tensor.dim() > 0 && named.tensor.numel() > 0;
    all.push_back(named.tensor);
    entries_.push_back(std::move(entry));
  }
  detail::broadcast_tensors(calls, all, 0, "the initial parameters and buffers");
  if (replicate_group_) {
    detail::GroupCalls replicas(replicate_group_, kFullyShardedName);
    detail::broadcast_tensors(replicas, all, 0, "the initial parameters and buffers");
  }
  for (Entry& entry : entries_) {
    if (!entry.sharded) {
      continue;
    }
    entry.global_shape = entry.module_tensor.sizes().vec();
    entry.rows = dim0_split(entry.global_shape[0], group_->getRank(), group_->getSize());
    entry.shard = entry.module_tensor.detach()
                      .narrow(0, entry.rows.begin, entry.rows.size)
                      .clone()
                      .set_requires_grad(entry.module_tensor.requires_grad());
  }
  gathered_ = true;
  release_parameters();
}

std::vector<at::Tensor> FullyShardedDataParallel::parameters() const {
  std::vector<at::Tensor> out;
  for (const Entry& entry : entries_) {
    if (!entry.is_buffer) {
      out.push_back(entry.shard);
    }
  }
  return out;
}

void FullyShardedDataParallel::gather_parameters() {
  at::NoGradGuard no_grad;
  const int world = group_->getSize();
  std::vector<at::Tensor> padded;  // per sharded entry: this rank's rows, padded to the longest
  std::vector<Entry*> sharded;
  for (Entry& entry : entries_) {
    if (!entry.sharded) {
      continue;
    }
    const int64_t longest = dim0_split(entry.global_shape[0], 0, world).size;
    std::vector<int64_t> shape = entry.global_shape;
    shape[0] = longest;
    at::Tensor slot = at::zeros(shape, entry.shard.options().requires_grad(false));
    slot.narrow(0, 0, entry.rows.size).copy_(entry.shard.detach());
    padded.push_back(slot);
    sharded.push_back(&entry);
  }
  detail::GroupCalls calls(group_, kFullyShardedName);
  for (detail::FlatGroup& group : detail::group_by_dtype(padded)) {
    const std::vector<at::Tensor> gathered = calls.all_gather(group.flat, "the shards");
    int64_t offset = 0;
    for (std::size_t i : group.members) {
      Entry& entry = *sharded[i];
      const int64_t per_row = row_numel(entry.global_shape);
      std::vector<at::Tensor> pieces;
      for (int r = 0; r < world; ++r) {
        const RowRange rows = dim0_split(entry.global_shape[0], r, world);
        pieces.push_back(gathered[r].narrow(0, offset, rows.size * per_row));
      }
      entry.module_tensor.set_data(at::cat(pieces).view(entry.global_shape));
      entry.module_tensor.mutable_grad() = at::Tensor();
      offset += padded[i].numel();
    }
  }
  gathered_ = true;
}

void FullyShardedDataParallel::reduce_gradients() {
  if (!gathered_) {
    detail::GroupCalls(group_, kFullyShardedName)
        .fail(ErrorKind::kUsage,
              "reduce_gradients() needs the full parameters: call gather_parameters() before "
              "the forward pass");
  }
  at::NoGradGuard no_grad;
  std::vector<Entry*> reduced;
  std::vector<at::Tensor> grads;
  for (Entry& entry : entries_) {
    if (entry.is_buffer || !entry.module_tensor.requires_grad()) {
      continue;
    }
    at::Tensor grad = entry.module_tensor.grad();
    grads.push_back(grad.defined() ? grad : at::zeros_like(entry.module_tensor));
    reduced.push_back(&entry);
  }
  detail::GroupCalls calls(group_, kFullyShardedName);
  const std::vector<at::Tensor> means = detail::mean_over_ranks(calls, grads, "the gradients");
  // This rank's part of each mean: its rows, or the whole of a replicated parameter; with HSDP,
  // averaged over the replicas too (only the rows cross the replicate group).
  std::vector<at::Tensor> mine;
  for (std::size_t i = 0; i < reduced.size(); ++i) {
    const Entry& entry = *reduced[i];
    mine.push_back(entry.sharded ? means[i].narrow(0, entry.rows.begin, entry.rows.size)
                                 : means[i]);
  }
  if (replicate_group_) {
    detail::GroupCalls replicas(replicate_group_, kFullyShardedName);
    mine = detail::mean_over_ranks(replicas, mine, "the gradients");
  }
  for (std::size_t i = 0; i < reduced.size(); ++i) {
    Entry& entry = *reduced[i];
    if (!entry.sharded) {
      entry.module_tensor.mutable_grad() = mine[i].clone();
    } else if (entry.shard.grad().defined()) {
      entry.shard.mutable_grad().add_(mine[i]);
    } else {
      entry.shard.mutable_grad() = mine[i].clone();
    }
  }
  release_parameters();
}

void FullyShardedDataParallel::release_parameters() {
  if (!gathered_) {
    return;
  }
  at::NoGradGuard no_grad;
  for (Entry& entry : entries_) {
    if (entry.sharded) {
      entry.module_tensor.set_data(at::empty({0}, entry.shard.options().requires_grad(false)));
      entry.module_tensor.mutable_grad() = at::Tensor();
    }
  }
  gathered_ = false;
}

std::vector<ParameterPlacement> FullyShardedDataParallel::placements() const {
  std::vector<ParameterPlacement> out;
  for (const Entry& entry : entries_) {
    ParameterPlacement placement;
    placement.fqn = entry.fqn;
    placement.local = entry.shard;
    placement.is_buffer = entry.is_buffer;
    if (entry.sharded) {
      placement.global_shape = entry.global_shape;
      placement.offsets.assign(entry.global_shape.size(), 0);
      placement.offsets[0] = entry.rows.begin;
    }
    out.push_back(std::move(placement));
  }
  return out;
}

}  // namespace dcpp
