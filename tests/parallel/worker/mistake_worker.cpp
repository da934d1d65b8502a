// One rank of a parallel-layout mistake (tests/parallel/mistakes_test.cpp), started by dcpp-launch
// on 4 ranks:
//
//   mistake_worker MISTAKE OUT [CKPT]
//
// builds a small tensor-parallel model (ColumnParallelLinear(4 -> 8), ReLU,
// RowParallelLinear(8 -> 4)) with MISTAKE made, trains one step and saves it into CKPT (when
// given) with the world as the checkpoint group. Writes OUT/rank<R>.txt: "accepted", or
// "refused <kind>: <message>" for the CheckpointError that stopped it. Exits 0 either way, so that
// the launcher lets every rank finish.
//
// MISTAKE, on a DeviceMesh {"dp": 2, "tp": 2} unless said:
//   none                        the right way: layers over "tp", TensorParallel(model, tp, dp)
//   layers-over-dp              the layers built over mesh.group("dp")
//   swapped-groups              TensorParallel(model, mesh.group("dp"), mesh.group("tp"))
//   same-group-twice            TensorParallel(model, mesh.group("tp"), mesh.group("tp"))
//   ddp-over-world              DataParallel(model, mesh.world_group()) of the TP model
//   ddp-over-dp                 DataParallel(model, mesh.group("dp")) of the TP model
//   fsdp-over-dp                FullyShardedDataParallel(model, mesh.group("dp")) of the TP model
//   pipeline-without-within     mesh {"pp": 2, "tp": 2}: PipelineStage(stage, first,
//                               mesh.group("pp")) of the TP stage, no TensorParallel within
//   hsdp-same-group-twice       mesh {"replicate": 2, "shard": 2}: FullyShardedDataParallel(an
//                               unsplit MLP, mesh.group("shard"), mesh.group("shard"))
//   tp-group-as-checkpoint-group  the right layout, saved with mesh.group("tp") as the
//                               checkpoint group (both data-parallel replicas save into CKPT)

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/device_mesh.h>
#include <dcpp/dist/launched_rank.h>
#include <dcpp/parallel/data_parallel.h>
#include <dcpp/parallel/fully_sharded_data_parallel.h>
#include <dcpp/parallel/pipeline_stage.h>
#include <dcpp/parallel/tensor_parallel.h>
#include <dcpp/parallel/tensor_parallel_layers.h>
#include <dcpp/state_dict/model_state_dict.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

namespace {

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;

// The unsplit MLP, the same on every rank, split over `group`.
torch::nn::Sequential tensor_parallel_mlp(const Group& group) {
  torch::manual_seed(7);
  const torch::nn::Linear up(4, 8), down(8, 4);
  return torch::nn::Sequential(dcpp::ColumnParallelLinear(up, group), torch::nn::ReLU(),
                               dcpp::RowParallelLinear(down, group));
}

void train_one_step(const std::vector<at::Tensor>& parameters,
                    const std::function<at::Tensor(const at::Tensor&)>& forward,
                    const std::function<void()>& synchronize) {
  torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.1));
  optimizer.zero_grad();
  forward(at::ones({3, 4})).pow(2).mean().backward();
  synchronize();
  optimizer.step();
}

void save(const dcpp::ModelLayout& layout, const std::string& directory, const Group& group) {
  if (directory.empty()) return;
  dcpp::save(dcpp::get_model_state_dict(layout), directory,
             dcpp::SaveOptions().with_process_group(group));
}

void run(const std::string& mistake, const std::string& checkpoint) {
  const auto options = dcpp::ProcessGroupOptions().with_timeout(std::chrono::seconds(30));
  if (mistake == "pipeline-without-within") {
    const auto mesh = dcpp::DeviceMesh::from_env({2, 2}, {"pp", "tp"}, options);
    const auto stage_of = mesh.coordinate("pp");
    const torch::nn::Sequential whole = tensor_parallel_mlp(mesh.group("tp"));
    const auto [first, end] = dcpp::PipelineStage::even_bounds(3, static_cast<int>(stage_of), 2);
    dcpp::PipelineStage stage(dcpp::PipelineStage::slice(whole, first, end), first,
                              mesh.group("pp"));
    save(stage, checkpoint, mesh.world_group());
    return;
  }
  if (mistake == "hsdp-same-group-twice") {
    const auto mesh = dcpp::DeviceMesh::from_env({2, 2}, {"replicate", "shard"}, options);
    torch::manual_seed(7);
    const torch::nn::Sequential model(torch::nn::Linear(4, 8), torch::nn::ReLU(),
                                      torch::nn::Linear(8, 4));
    dcpp::FullyShardedDataParallel hsdp(model.ptr(), mesh.group("shard"), mesh.group("shard"));
    save(hsdp, checkpoint, mesh.world_group());
    return;
  }
  const auto mesh = dcpp::DeviceMesh::from_env({2, 2}, {"dp", "tp"}, options);
  const Group tp = mesh.group("tp"), dp = mesh.group("dp");
  torch::nn::Sequential model = tensor_parallel_mlp(mistake == "layers-over-dp" ? dp : tp);
  const auto forward = [&](const at::Tensor& input) { return model->forward(input); };
  if (mistake == "ddp-over-world" || mistake == "ddp-over-dp") {
    dcpp::DataParallel ddp(model.ptr(), mistake == "ddp-over-dp" ? dp : mesh.world_group());
    train_one_step(ddp.parameters(), forward, [&] { ddp.synchronize_gradients(); });
    save(ddp, checkpoint, mesh.world_group());
    return;
  }
  if (mistake == "fsdp-over-dp") {
    dcpp::FullyShardedDataParallel fsdp(model.ptr(), dp);
    save(fsdp, checkpoint, mesh.world_group());
    return;
  }
  const Group tensor_group = mistake == "swapped-groups" ? dp : tp;
  const Group data_group = mistake == "swapped-groups"     ? tp
                           : mistake == "same-group-twice" ? tp
                                                           : dp;
  dcpp::TensorParallel layout(model.ptr(), tensor_group, data_group);
  train_one_step(layout.parameters(), forward, [&] { layout.synchronize_gradients(); });
  save(layout, checkpoint, mistake == "tp-group-as-checkpoint-group" ? tp : mesh.world_group());
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // dcpp-launch --fork: the ranks fork from here
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MISTAKE OUT [CKPT]\n", argv[0]);
    return 2;
  }
  at::set_num_threads(1);
  const std::string rank = std::getenv("RANK") != nullptr ? std::getenv("RANK") : "0";
  std::ofstream out(std::string(argv[2]) + "/rank" + rank + ".txt");
  try {
    run(argv[1], argc > 3 ? argv[3] : "");
    out << "accepted\n";
  } catch (const dcpp::CheckpointError& error) {
    out << "refused " << dcpp::to_string(error.kind()) << ": " << error.what() << "\n";
  } catch (const std::exception& error) {
    out << "failed: " << error.what() << "\n";
  }
  return 0;
}
