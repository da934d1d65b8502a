// The DeviceMesh (device_mesh.h): row-major coordinates, as torch.arange(world).view(shape), and
// one Gloo group per dimension made from the job's store (and an NCCL one beside it, for training
// on GPUs, when asked).

#include <dcpp/dist/device_mesh.h>

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <set>

namespace dcpp {
namespace {

std::string listed(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "\"" : ", \"") + name + "\"";
  return text;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t n : shape) text += (text.empty() ? "" : ", ") + std::to_string(n);
  return "(" + text + ")";
}

}  // namespace

DeviceMesh::DeviceMesh(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                       std::vector<int64_t> shape, std::vector<std::string> names,
                       ProcessGroupOptions options, TrainingBackend training)
    : rank_(rank),
      world_size_(world_size),
      shape_(std::move(shape)),
      names_(std::move(names)),
      training_(training) {
  const auto refuse = [&](const std::string& why) {
    throw CheckpointError(ErrorKind::kUsage, "DeviceMesh of shape " + shape_text(shape_) +
                                                 " named " + listed(names_) + " on rank " +
                                                 std::to_string(rank) + ": " + why);
  };
  if (shape_.empty() || shape_.size() != names_.size()) {
    refuse("give one name per dimension, and at least one dimension");
  }
  if (std::set<std::string>(names_.begin(), names_.end()).size() != names_.size() ||
      std::any_of(names_.begin(), names_.end(), [](const auto& n) { return n.empty(); })) {
    refuse("the dimensions' names must be distinct and not empty");
  }
  int64_t ranks = 1;
  for (int64_t n : shape_) {
    if (n < 1) refuse("every dimension needs at least one rank");
    ranks *= n;
  }
  if (ranks != world_size) {
    refuse("the mesh holds " + std::to_string(ranks) + " ranks and the job has " +
           std::to_string(world_size) + "; give a shape whose product is the world size");
  }
  if (rank < 0 || rank >= world_size) refuse("the rank is outside the job");

  coordinates_.assign(shape_.size(), 0);
  for (std::size_t d = shape_.size(), rest = static_cast<std::size_t>(rank); d-- > 0;) {
    coordinates_[d] = static_cast<int64_t>(rest % static_cast<std::size_t>(shape_[d]));
    rest /= static_cast<std::size_t>(shape_[d]);
  }
  const std::string prefix = options.group_name + ".mesh.";
  world_group_ = make_gloo_process_group(
      store, rank, world_size, ProcessGroupOptions(options).with_group_name(prefix + "world"));
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    // Which of the dimension's groups: the other coordinates, row-major.
    int64_t index = 0;
    for (std::size_t other = 0; other < shape_.size(); ++other) {
      if (other != d) index = index * shape_[other] + coordinates_[other];
    }
    const std::string name = prefix + names_[d] + "." + std::to_string(index);
    groups_.push_back(make_gloo_process_group(store, static_cast<int>(coordinates_[d]),
                                              static_cast<int>(shape_[d]),
                                              ProcessGroupOptions(options).with_group_name(name)));
    if (training == TrainingBackend::kNccl) {
      training_groups_.push_back(make_nccl_process_group(
          store, static_cast<int>(coordinates_[d]), static_cast<int>(shape_[d]),
          ProcessGroupOptions(options).with_group_name(name + ".nccl")));
    }
  }
}

DeviceMesh DeviceMesh::from_env(std::vector<int64_t> shape, std::vector<std::string> names,
                                ProcessGroupOptions options, TrainingBackend training) {
  const LaunchEnvironment env = LaunchEnvironment::from_env();
  const c10::intrusive_ptr<c10d::Store> store = make_tcp_store(env, options);
  if (options.gloo_hostname.empty()) options.gloo_hostname = gloo_hostname_for(env);
  return DeviceMesh(store, env.rank, env.world_size, std::move(shape), std::move(names),
                    std::move(options), training);
}

std::size_t DeviceMesh::dimension(std::string_view name) const {
  const auto found = std::find(names_.begin(), names_.end(), name);
  if (found == names_.end()) {
    throw CheckpointError(ErrorKind::kUsage, "DeviceMesh: no dimension is named \"" +
                                                 std::string(name) + "\" (its dimensions are " +
                                                 listed(names_) + ")");
  }
  return static_cast<std::size_t>(found - names_.begin());
}

int64_t DeviceMesh::size(std::string_view name) const { return shape_[dimension(name)]; }

int64_t DeviceMesh::coordinate(std::string_view name) const {
  return coordinates_[dimension(name)];
}

c10::intrusive_ptr<c10d::ProcessGroup> DeviceMesh::group(std::string_view name) const {
  return groups_[dimension(name)];
}

c10::intrusive_ptr<c10d::ProcessGroup> DeviceMesh::training_group(std::string_view name) const {
  const std::size_t d = dimension(name);
  return training_ == TrainingBackend::kNccl ? training_groups_[d] : groups_[d];
}

std::vector<int> DeviceMesh::group_ranks(std::string_view name) const {
  const std::size_t d = dimension(name);
  std::vector<int64_t> at = coordinates_;
  std::vector<int> ranks;
  for (at[d] = 0; at[d] < shape_[d]; ++at[d]) ranks.push_back(rank_at(at));
  return ranks;
}

int DeviceMesh::rank_at(const std::vector<int64_t>& coordinates) const {
  if (coordinates.size() != shape_.size()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "DeviceMesh::rank_at: give " + std::to_string(shape_.size()) +
                              " coordinates, one per dimension (" + listed(names_) + ")");
  }
  int64_t rank = 0;
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    if (coordinates[d] < 0 || coordinates[d] >= shape_[d]) {
      throw CheckpointError(ErrorKind::kUsage, "DeviceMesh::rank_at: coordinates " +
                                                   shape_text(coordinates) +
                                                   " lie outside the shape " + shape_text(shape_));
    }
    rank = rank * shape_[d] + coordinates[d];
  }
  return static_cast<int>(rank);
}

}  // namespace dcpp
