#pragma once
// How a parallel layout holds the parameters and buffers of a model: the one description the
// state-dict helpers need to key state by the names of the unparallelized model. dcpp's reference
// wrappers (parallel/: data parallel, fully sharded, pipeline stage) describe themselves through
// it, and so can any other layout.

#include <dcpp/core/export.h>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp {

/// One parameter or buffer of the unparallelized model, as this process holds it.
struct DCPP_API ParameterPlacement {
  /// The fully qualified name in the unparallelized model, e.g. "layers.0.attn.in_proj.weight".
  std::string fqn;
  /// The tensor this process trains with and its optimizer steps: the whole tensor when it is
  /// replicated or owned by this process, this process's piece when it is sharded. Shares storage
  /// with the model: loading writes into it in place.
  at::Tensor local;
  /// Sharded tensors only: the shape of the whole tensor and where `local` starts in it (one
  /// offset per dimension). Both empty when `local` is the whole tensor.
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offsets;
  /// A buffer (running statistics, ...) rather than a parameter: never in an optimizer.
  bool is_buffer = false;

  bool is_sharded() const { return !global_shape.empty(); }
};

/// The layout of a model on this process.
///
/// Contract for implementations: `placements()` lists every parameter and buffer this process
/// holds, in the model's registration order, with unique FQNs; a sharded tensor's pieces on the
/// processes of `shard_group()` are disjoint and together cover the whole tensor; a whole tensor
/// listed by several processes holds equal values on each (replication), and so does a piece
/// listed by the processes of `replicate_group()`. A pipeline stage lists only the tensors it owns.
///
/// The groups of an N-D layout, on a DeviceMesh {"dp", "tp"} (<dcpp/dist/device_mesh.h>): tensor
/// parallel x data parallel shards over mesh.group("tp") and replicates over mesh.group("dp");
/// HSDP (mesh {"replicate", "shard"}) shards over "shard" and replicates over "replicate"; a
/// pipeline of either (mesh {"pp", ...}) adds its stages over mesh.group("pp").
class DCPP_API ModelLayout {
 public:
  virtual ~ModelLayout() = default;

  virtual std::vector<ParameterPlacement> placements() const = 0;

  /// The processes of this layout: for a 1-D layout (data parallel, fully sharded, a pipeline),
  /// those across which tensors are split or replicated; the default of shard_group(). nullptr:
  /// this process alone.
  virtual c10::intrusive_ptr<c10d::ProcessGroup> process_group() const { return {}; }

  /// The processes across which sharded tensors are split (what a full state dict gathers over):
  /// process_group() unless the layout says otherwise.
  virtual c10::intrusive_ptr<c10d::ProcessGroup> shard_group() const { return process_group(); }

  /// The processes that hold the same pieces as this one (the data-parallel replicas of a tensor
  /// parallel or HSDP layout), ordered alike on every rank of the shard group; nullptr when none
  /// does. The state-dict helpers deliver a full state dict with `cpu_offload` to the process that
  /// is rank 0 of the shard, replicate and stage groups alone (global rank 0 on a DeviceMesh), and
  /// `broadcast_from_rank0` sends from it to every process of the three.
  virtual c10::intrusive_ptr<c10d::ProcessGroup> replicate_group() const { return {}; }

  /// The processes that hold the other pipeline stages' tensors, one per stage, in stage order
  /// (this rank's pipeline peers: a PipelineStage's group), or nullptr when there are none. With
  /// one, a full state dict is the union of the stages' (gathered over this group too), and the
  /// first process is rank 0 of it as well: stage 0's.
  virtual c10::intrusive_ptr<c10d::ProcessGroup> stage_group() const { return {}; }
};

}  // namespace dcpp
