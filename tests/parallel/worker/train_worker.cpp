// One rank of a parallel training test, started by dcpp-launch (or alone for the single layout).
//
//   train_worker MODEL LAYOUT run STEPS RESULT        trains steps [0, STEPS) from the seed init
//   train_worker MODEL LAYOUT save K CKPT RESULT       trains steps [0, K), saves model and Adam
//   train_worker MODEL LAYOUT resume K M CKPT RESULT   starts from another init, restores CKPT,
//                                                      trains steps [K, K + M)
//   train_worker MODEL LAYOUT describe                 prints each placement of this rank:
//                                                      "placement FQN sizes=.. global=..
//                                                      offsets=.."
//
// MODEL: mlp | transformer, or -f64 of either, or a comma-separated list of them, run one after
// the other in this process (each from its own seed), its CKPT and RESULT in CKPT/MODEL and
// RESULT/MODEL: a test starts the ranks once for several models (a process takes half a second
// of libtorch's start-up). LAYOUT: single | ddp | fsdp | pipeline (over WORLD_SIZE ranks), or
// tp<T>dp<D> | tp<T>dp<D>pp<P> | fsdp<D>pp<P> | hsdp<R>x<S> on a DeviceMesh of their WORLD_SIZE
// ranks (training_setup.h).
// RESULT is a dcpp checkpoint of what was trained: "losses" (float64, one per step trained, the
// mean over the global batch) and "params.<fqn>" (the final parameters, sharded as trained).

#include "checkpoint_io.h"
#include "comma_list.h"
#include "training_setup.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/dist/launched_rank.h>
#include <dcpp/dist/process_group.h>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>

#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kSeed = 7;
constexpr uint64_t kOtherSeed = 1234;  // a resumed run must not depend on its own init

std::vector<double> train(dcpp::test::Trainer& trainer, torch::optim::Optimizer& optimizer,
                          const dcpp::test::ModelSpec& spec, int64_t first, int64_t count) {
  std::vector<double> losses;
  for (int64_t step = first; step < first + count; ++step) {
    optimizer.zero_grad();
    losses.push_back(trainer.forward_backward(dcpp::test::global_batch(spec, step)));
    optimizer.step();
  }
  return losses;
}

void write_result(const dcpp::test::Trainer& trainer, const std::vector<double>& losses,
                  const std::string& directory,
                  const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  dcpp::StateDict result;
  result.insert("losses", at::tensor(losses, at::kDouble));
  result.insert("params", dcpp::test::tensors_of(trainer.layout()));
  dcpp::SaveOptions options;
  options.ranks.process_group = group;
  options.file_system.sync_files = false;
  dcpp::save(result, directory, options);
}

// Runs `mode` for `model`; `args` as on the command line, MODEL's paths already its own.
bool run(const std::string& model, const std::vector<std::string>& args,
         const c10::intrusive_ptr<c10d::ProcessGroup>& group, const dcpp::DeviceMesh* mesh) {
  const dcpp::test::ModelSpec spec = dcpp::test::model_spec(model);
  const std::string& layout = args[1];
  const std::string& mode = args[2];
  const bool resume = mode == "resume";
  auto trainer = dcpp::test::make_trainer(layout, spec, resume ? kOtherSeed : kSeed, group, mesh);
  torch::optim::Adam optimizer(trainer->parameters(), torch::optim::AdamOptions(1e-2));
  if (mode == "describe") {
    for (const dcpp::ParameterPlacement& placement : trainer->layout().placements()) {
      std::ostringstream line;
      line << "placement " << placement.fqn << " sizes=" << placement.local.sizes()
           << " global=" << at::IntArrayRef(placement.global_shape)
           << " offsets=" << at::IntArrayRef(placement.offsets) << "\n";
      std::fputs(line.str().c_str(), stdout);
    }
  } else if (mode == "run" && args.size() == 5) {
    write_result(*trainer, train(*trainer, optimizer, spec, 0, std::stoll(args[3])), args[4],
                 group);
  } else if (mode == "save" && args.size() == 6) {
    const auto losses = train(*trainer, optimizer, spec, 0, std::stoll(args[3]));
    dcpp::test::save_training(trainer->layout(), optimizer, args[4], group);
    write_result(*trainer, losses, args[5], group);
  } else if (resume && args.size() == 7) {
    dcpp::test::load_training(trainer->layout(), optimizer, args[5], group);
    write_result(*trainer,
                 train(*trainer, optimizer, spec, std::stoll(args[3]), std::stoll(args[4])),
                 args[6], group);
  } else {
    std::fprintf(stderr, "bad arguments for mode '%s'\n", mode.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // dcpp-launch --fork: the ranks fork from here
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 3) {
    std::fprintf(stderr, "usage: %s MODEL[,MODEL...] LAYOUT run|save|resume ...\n", argv[0]);
    return 2;
  }
  try {
    at::set_num_threads(1);  // the same arithmetic on every run
    const auto options = dcpp::ProcessGroupOptions().with_timeout(std::chrono::seconds(60));
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    std::optional<dcpp::DeviceMesh> mesh;
    if (const auto shape = dcpp::test::mesh_shape_of(args[1])) {
      mesh.emplace(dcpp::DeviceMesh::from_env(shape->shape, shape->names, options));
      group = mesh->world_group();
    } else if (args[1] != "single") {
      group = dcpp::make_gloo_process_group_from_env(options);
    }
    const std::size_t first_path = args[2] == "resume" ? 5 : 4;  // CKPT and RESULT from here
    for (const std::string& model : dcpp::test::split_at_commas(args[0])) {
      std::vector<std::string> own = args;
      for (std::size_t i = first_path; i < own.size(); ++i) {
        own[i] += "/" + model;
      }
      if (!run(model, own, group, mesh ? &*mesh : nullptr)) {
        return 2;
      }
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "train_worker: %s\n", error.what());
    return 1;
  }
}
