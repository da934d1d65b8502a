#include "layer_groups.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <cstdlib>

namespace dcpp::detail {

namespace {

// "dcpp::ColumnParallelLinearImpl" -> "ColumnParallelLinear".
std::string short_type_name(std::string name) {
  const std::size_t colon = name.rfind("::");
  if (colon != std::string::npos) name.erase(0, colon + 2);
  const std::string impl = "Impl";
  if (name.size() > impl.size() &&
      name.compare(name.size() - impl.size(), impl.size(), impl) == 0) {
    name.resize(name.size() - impl.size());
  }
  return name;
}

std::string layer_name(const TensorParallelLayer& layer) {
  return (layer.fqn.empty() ? std::string("the model") : "layer '" + layer.fqn + "'") + " (" +
         layer.type + ")";
}

constexpr const char* kTensorParallelFix =
    "build every tensor-parallel layer over the group given to TensorParallel as its tensor "
    "group, and give it the data-parallel group as its data group: on a DeviceMesh {\"dp\", "
    "\"tp\"}, ColumnParallelLinear(linear, mesh.group(\"tp\")), ... and "
    "TensorParallel(model, mesh.group(\"tp\"), mesh.group(\"dp\")) (docs/parallel.md, "
    "\"Mistakes\")";

// This process's rank in the job, as the launcher (dcpp-launch, torchrun) set RANK; -1 unknown.
int64_t job_rank() {
  const char* rank = std::getenv("RANK");
  if (rank == nullptr || *rank == '\0') return -1;
  char* end = nullptr;
  const long long value = std::strtoll(rank, &end, 10);
  return *end == '\0' && value >= 0 ? value : -1;
}

// "rank 1" of a group, with its rank in the job when known: "rank 1 (global rank 3)".
std::string member_name(int64_t member, int64_t global) {
  return "rank " + std::to_string(member) +
         (global >= 0 ? " (global rank " + std::to_string(global) + ")" : "");
}

std::vector<int64_t> gathered_values(GroupCalls& calls, std::vector<int64_t> values,
                                     const std::string& what) {
  const at::Tensor mine = at::tensor(values, at::kLong).to(calls.message_device());
  std::vector<int64_t> all;
  for (const at::Tensor& theirs : calls.all_gather(mine, what)) {
    const at::Tensor cpu = theirs.cpu().contiguous();
    all.insert(all.end(), cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel());
  }
  return all;
}

}  // namespace

std::vector<TensorParallelLayer> tensor_parallel_layers(const torch::nn::Module& model) {
  std::vector<TensorParallelLayer> layers;
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    if (const auto* layer = dynamic_cast<const TensorParallelModule*>(item.value().get())) {
      layers.push_back({item.key(), short_type_name(item.value()->name()), layer});
    }
  }
  return layers;
}

void refuse_tensor_parallel_layers(const torch::nn::Module& model, const std::string& wrapper) {
  const std::vector<TensorParallelLayer> layers = tensor_parallel_layers(model);
  if (layers.empty()) return;
  throw CheckpointError(
      ErrorKind::kUsage,
      wrapper + ": " + layer_name(layers.front()) +
          (layers.size() > 1 ? " and " + std::to_string(layers.size() - 1) + " other layer(s) are"
                             : " is") +
          " split over a tensor-parallel group; " + wrapper +
          " would take each rank's slice for the whole tensor, make every rank's slices rank 0's "
          "and save them at the slice's shape. Describe such a model with TensorParallel(model, "
          "tensor_group, data_group), which averages the gradients over the data group (on a "
          "DeviceMesh {\"dp\", \"tp\"}: TensorParallel(model, mesh.group(\"tp\"), "
          "mesh.group(\"dp\"))), and a pipeline of it with PipelineStage(stage_modules, first, "
          "mesh.group(\"pp\"), that TensorParallel) (docs/parallel.md, \"Mistakes\")");
}

ShardGroupVerdict check_layers_split_over(GroupCalls& tensor_calls,
                                          const std::vector<TensorParallelLayer>& layers) {
  ShardGroupVerdict verdict{tensor_calls.rank(), tensor_calls.size(), ""};
  const std::string prefix = "TensorParallel on " + member_name(verdict.rank, job_rank()) +
                             " of its tensor-parallel group (" + std::to_string(verdict.size) +
                             " ranks): ";
  // Per member: its number of layers and its rank in the job.
  const std::vector<int64_t> counts =
      gathered_values(tensor_calls, {static_cast<int64_t>(layers.size()), job_rank()},
                      "the number of tensor-parallel layers");
  const std::size_t members = counts.size() / 2;
  const auto name_of = [&](std::size_t member) {
    return member_name(static_cast<int64_t>(member), counts[member * 2 + 1]);
  };
  for (std::size_t member = 0; member < members; ++member) {
    if (counts[member * 2] != counts[0]) {
      verdict.refusal = prefix + name_of(member) + " of the tensor group holds " +
                        std::to_string(counts[member * 2]) + " tensor-parallel layers, " +
                        name_of(0) + " holds " + std::to_string(counts[0]) +
                        "; every rank of the tensor-parallel group must build the same model";
      return verdict;
    }
  }
  if (layers.empty()) return verdict;
  // Per layer: whether it says its group, and its rank and size in it.
  std::vector<int64_t> mine;
  for (const TensorParallelLayer& layer : layers) {
    const auto group = layer.layer->tensor_parallel_group();
    mine.push_back(group.has_value() ? 1 : 0);
    mine.push_back(group && *group ? (*group)->getRank() : 0);
    mine.push_back(group && *group ? (*group)->getSize() : 1);
  }
  const std::vector<int64_t> all = gathered_values(tensor_calls, mine, "the layers' groups");
  for (std::size_t member = 0; member < members; ++member) {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const int64_t* said = &all[(member * layers.size() + i) * 3];
      if (said[0] == 0 || (said[1] == static_cast<int64_t>(member) && said[2] == verdict.size)) {
        continue;
      }
      verdict.refusal =
          prefix + layer_name(layers[i]) + " is split over a group of " + std::to_string(said[2]) +
          " rank(s) in which " + name_of(member) + " of the tensor group is rank " +
          std::to_string(said[1]) +
          ": it was built over another group than the tensor group (the data-parallel group, "
          "the groups swapped, or the world). Its slices would be placed wrongly in the whole "
          "tensor and the data group's broadcast would overwrite them; " +
          kTensorParallelFix;
      return verdict;
    }
  }
  return verdict;
}

void replicate_group_check(GroupCalls& replicate_calls, const std::string& wrapper,
                           const ShardGroupVerdict& shard, const std::string& shard_name,
                           const std::string& replicate_name, const std::string& fix) {
  // Per member: its rank and size in its shard group, whether that refused, its rank in the job.
  constexpr std::size_t kFields = 4;
  const std::vector<int64_t> all = gathered_values(
      replicate_calls, {shard.rank, shard.size, shard.refusal.empty() ? 0 : 1, job_rank()},
      "the ranks of the " + replicate_name + " group in the " + shard_name + " group");
  if (!shard.refusal.empty()) throw CheckpointError(ErrorKind::kUsage, shard.refusal);
  const std::string prefix = wrapper + " on " + member_name(replicate_calls.rank(), job_rank()) +
                             " of its " + replicate_name + " group (" +
                             std::to_string(replicate_calls.size()) + " ranks): ";
  const std::size_t members = all.size() / kFields;
  const auto field = [&](std::size_t member, std::size_t i) { return all[member * kFields + i]; };
  const auto name_of = [&](std::size_t member) {
    return member_name(static_cast<int64_t>(member), field(member, 3));
  };
  for (std::size_t member = 0; member < members; ++member) {
    if (field(member, 2) != 0) {
      throw CheckpointError(ErrorKind::kUsage, prefix + name_of(member) + " of the " +
                                                   replicate_name + " group refused its " +
                                                   shard_name +
                                                   " group's layers (its own error says why)");
    }
  }
  for (std::size_t member = 0; member < members; ++member) {
    if (field(member, 0) == field(0, 0) && field(member, 1) == field(0, 1)) continue;
    throw CheckpointError(
        ErrorKind::kUsage,
        prefix + name_of(member) + " of the " + replicate_name + " group is rank " +
            std::to_string(field(member, 0)) + " of " + std::to_string(field(member, 1)) +
            " in its " + shard_name + " group, " + name_of(0) + " is rank " +
            std::to_string(field(0, 0)) + " of " + std::to_string(field(0, 1)) +
            ": the members of the " + replicate_name +
            " group must hold the same piece of the model (the same " + shard_name +
            " rank), or their broadcasts and gradient averages would mix different pieces. The " +
            shard_name + " and " + replicate_name +
            " groups must be two dimensions of one mesh, not the same group twice nor swapped; " +
            fix);
  }
}

}  // namespace dcpp::detail
