#pragma once
// The checks that keep a parallel wrapper from training or saving a wrong model when it is given
// the wrong group: a model's tensor-parallel layers against the wrappers that would take their
// slices for whole tensors, the layers' own group against TensorParallel's tensor group, and a
// replicate group against the shard group it replicates. Every refusal is a CheckpointError
// (kUsage) naming the layer or rank, the groups and the fix.

#include "core/group_calls.h"

#include <dcpp/parallel/tensor_parallel_layers.h>

#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace dcpp::detail {

/// A tensor-parallel layer of a model: its name in the model ("" for the model itself), its type
/// ("ColumnParallelLinear") and the layer.
struct TensorParallelLayer {
  std::string fqn;
  std::string type;
  const TensorParallelModule* layer;
};

/// The model's tensor-parallel layers, in module order.
std::vector<TensorParallelLayer> tensor_parallel_layers(const torch::nn::Module& model);

/// Local: throws when `model` holds a tensor-parallel layer, which `wrapper` (DataParallel,
/// FullyShardedDataParallel, a PipelineStage without a layout within) would take for whole
/// tensors: its replicas would be overwritten by rank 0's slices and it would be saved at the
/// slice's shape.
void refuse_tensor_parallel_layers(const torch::nn::Module& model, const std::string& wrapper);

/// What a shard group learned of itself, for replicate_group_check: this rank's rank and size in
/// it, and the refusal its own checks came to ("" when none).
struct ShardGroupVerdict {
  int rank = 0;
  int size = 1;
  std::string refusal;
};

/// Collective over `tensor_calls`' group: each layer that says its group must be split over a
/// group in which every member of the tensor group has its own rank there, of the same size
/// (another group, as the data-parallel one or a swapped mesh dimension, is refused, naming the
/// layer). Returns the refusal rather than throwing it, so that replicate_group_check can tell the
/// replicas first.
ShardGroupVerdict check_layers_split_over(GroupCalls& tensor_calls,
                                          const std::vector<TensorParallelLayer>& layers);

/// Collective over `replicate_calls`' group: its members must hold the same piece (each the same
/// rank of a shard group of the same size) or `wrapper` would average and broadcast different
/// pieces into one another; named "<replicate_name>" and "<shard_name>" in the refusal. Throws
/// `shard`'s refusal, or any member's, or its own; returns when none.
void replicate_group_check(GroupCalls& replicate_calls, const std::string& wrapper,
                           const ShardGroupVerdict& shard, const std::string& shard_name,
                           const std::string& replicate_name, const std::string& fix);

}  // namespace dcpp::detail
