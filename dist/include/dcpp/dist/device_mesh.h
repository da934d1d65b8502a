#pragma once
// A job's ranks as an N-dimensional grid with named dimensions ("pp", "dp", "tp"), laid out as
// PyTorch's `init_device_mesh` lays them out, with this rank's process group along each dimension.
// In dist/, where groups are made; the parallel layouts (parallel/) take its groups.

#include <dcpp/core/export.h>
#include <dcpp/dist/process_group.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp {

/// What a DeviceMesh's training groups (DeviceMesh::training_group) run on.
enum class TrainingBackend {
  kGloo,  ///< the Gloo groups themselves: CPU training
  kNccl,  ///< NCCL groups of the same ranks beside the Gloo ones: GPU training (docs/gpu.md)
};

/// The ranks of a job on a grid of `shape`, one name per dimension. Rank r sits at the row-major
/// coordinates of r (the last dimension varies fastest): the mesh of PyTorch's
/// `init_device_mesh(device, shape, mesh_dim_names=names)`, `torch.arange(world).view(shape)`.
/// For a shape {2, 2} named {"dp", "tp"}: ranks 0 and 1 are the tensor-parallel pair of data
/// parallel replica 0, ranks 0 and 2 the data-parallel pair of tensor-parallel rank 0.
///
/// Along each dimension, this rank's group is the ranks that share every other coordinate with
/// it, ordered by their coordinate along that dimension (so a rank's rank in it is its
/// coordinate). The groups are Gloo groups: checkpoint traffic, the state-dict helpers' gathers
/// and broadcasts, and CPU training. A mesh made with TrainingBackend::kNccl also has an NCCL
/// group of the same ranks along each dimension, training_group(), for the training loop's
/// collectives on CUDA tensors; its Gloo groups stay what layouts and the Checkpointer are given
/// for checkpoint traffic. Not thread-safe; the groups follow c10d's rules (the same collectives
/// in the same order on every member).
class DCPP_API DeviceMesh {
 public:
  /// Collective over every rank of the job: makes the group of all ranks, then one group per
  /// dimension, each from `store` with make_gloo_process_group, named
  /// "<options.group_name>.mesh.<dimension>.<index>" (the whole job's
  /// "<options.group_name>.mesh.world"; <index>: which of the dimension's groups, in row-major
  /// order of the other coordinates). Blocks until each group's
  /// ranks have all arrived (options.timeout). With `training` kNccl, an NCCL group per
  /// dimension too, named as its Gloo group with ".nccl" after it (make_nccl_process_group).
  /// Throws CheckpointError (kUsage) when `names` and `shape` differ in length, a name is empty or
  /// repeats, a dimension is below 1, or the shape's product is not `world_size`; and as
  /// make_gloo_process_group and make_nccl_process_group when a group cannot be made.
  DeviceMesh(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
             std::vector<int64_t> shape, std::vector<std::string> names,
             ProcessGroupOptions options = {}, TrainingBackend training = TrainingBackend::kGloo);

  /// The mesh of a job started by `dcpp-launch` or torchrun: its store from the torchrun
  /// variables (LaunchEnvironment::from_env, make_tcp_store), then the constructor. That starts
  /// the job's store on rank 0: a job that makes other groups too (make_gloo_process_group_from_env
  /// would start a second store on the same port, and fail) makes the store once with
  /// make_tcp_store and gives it to the constructor and to make_gloo_process_group(store, ...).
  static DeviceMesh from_env(std::vector<int64_t> shape, std::vector<std::string> names,
                             ProcessGroupOptions options = {},
                             TrainingBackend training = TrainingBackend::kGloo);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<std::string>& names() const { return names_; }
  /// This rank's coordinates, one per dimension.
  const std::vector<int64_t>& coordinates() const { return coordinates_; }

  /// The size of dimension `name`, and this rank's coordinate along it. Throw CheckpointError
  /// (kUsage) naming the mesh's dimensions for a name it has not.
  int64_t size(std::string_view name) const;
  int64_t coordinate(std::string_view name) const;

  /// This rank's group along dimension `name` (see the class comment).
  c10::intrusive_ptr<c10d::ProcessGroup> group(std::string_view name) const;
  /// This rank's training group along dimension `name`: the NCCL group of group(name)'s ranks on
  /// a mesh made with TrainingBackend::kNccl, group(name) itself on one made with kGloo.
  c10::intrusive_ptr<c10d::ProcessGroup> training_group(std::string_view name) const;
  TrainingBackend training_backend() const { return training_; }
  /// The job's ranks in group(name), in its order.
  std::vector<int> group_ranks(std::string_view name) const;
  /// The group of every rank of the job, ranks as the job's.
  c10::intrusive_ptr<c10d::ProcessGroup> world_group() const { return world_group_; }

  /// The rank at `coordinates` (one per dimension, each inside the shape); throws CheckpointError
  /// (kUsage) otherwise.
  int rank_at(const std::vector<int64_t>& coordinates) const;

 private:
  std::size_t dimension(std::string_view name) const;

  int rank_;
  int world_size_;
  std::vector<int64_t> shape_;
  std::vector<std::string> names_;
  std::vector<int64_t> coordinates_;
  c10::intrusive_ptr<c10d::ProcessGroup> world_group_;
  std::vector<c10::intrusive_ptr<c10d::ProcessGroup>> groups_;  // one per dimension
  TrainingBackend training_ = TrainingBackend::kGloo;
  std::vector<c10::intrusive_ptr<c10d::ProcessGroup>> training_groups_;  // kNccl: one per dimension
};

}  // namespace dcpp
