// A Megatron-LM save directory from C++ (docs/megatron.md): a CheckpointManager with Megatron-LM's
// step names saves a small model's weights, its RNG state as a ShardedObject and Megatron's common
// state (the iteration, `args`) as Megatron-LM's training loop does, `iter_0000100/` in
// Megatron-Core's layout and `latest_checkpointed_iteration.txt`; Megatron-LM resumes from it.
// A second manager then resumes from the directory, as it would from a Megatron-LM run's.
//
//   megatron_lm_steps DIR   saves iterations 100 and 200 into DIR (empty or missing), resumes
//                           from DIR and checks the weights and the common state; exit status 0
//                           when everything read back equals what was saved

#include <dcpp/dcpp.h>

#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>

namespace {

// What Megatron-LM saves at `iteration`: the weights under their names, the RNG state of this
// (only) rank, and the common state that rank 0 saves.
dcpp::StateDict megatron_state(torch::nn::Linear& layer, int64_t iteration) {
  dcpp::StateDict state;
  state.insert("decoder.linear.weight", layer->weight.detach());
  state.insert("decoder.linear.bias", layer->bias.detach());
  dcpp::megatron::add_sharded_object(state, "rng_state",
                                     at::detail::getDefaultCPUGenerator().get_state(), {0}, {1});
  dcpp::StateDict common;
  common.insert("iteration", iteration);
  // Megatron-LM's args hold torch dtypes and enums too: Python values dcpp keeps as data.
  common.insert("args", dcpp::python_object_value(
                            dcpp::kNamespaceClass,
                            {{"hidden_size", int64_t{8}},
                             {"lr", 1e-3},
                             {"params_dtype", dcpp::torch_dtype_value(at::kBFloat16)}}));
  dcpp::megatron::add_common_state(state, std::move(common));
  return state;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: megatron_lm_steps DIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  torch::manual_seed(0);
  torch::nn::Linear layer(8, 8);
  {
    dcpp::CheckpointManager manager(
        dcpp::CheckpointManagerOptions().with_root(dir).with_async(false).with_step_names(
            dcpp::StepNames::kMegatronLM));
    for (const int64_t iteration : {100, 200}) {
      torch::NoGradGuard no_grad;
      layer->weight.add_(0.5);  // "training"
      manager.save(megatron_state(layer, iteration), dcpp::SaveRequest().with_step(iteration));
    }
  }
  std::ifstream tracker(dir / dcpp::kMegatronTrackerFile);
  std::string latest;
  tracker >> latest;
  std::cout << "saved " << (dir / "iter_0000200").string() << "; " << dcpp::kMegatronTrackerFile
            << " says " << latest << "\n";

  // Resume, as a C++ job resumes from a Megatron-LM run's save directory.
  dcpp::CheckpointManager resumed(dcpp::CheckpointManagerOptions().with_root(dir));
  dcpp::StateDict state;
  state.insert("decoder.linear.weight", torch::zeros({8, 8}));
  state.insert("decoder.linear.bias", torch::zeros({8}));
  const std::optional<dcpp::CheckpointInfo> info = resumed.restore(state);
  const dcpp::StateDict common = dcpp::megatron::load_common_state_dict(info->path);
  const bool equal = info->step == 200 && latest == "200" &&
                     state.at("decoder.linear.weight").tensor().equal(layer->weight) &&
                     state.at("decoder.linear.bias").tensor().equal(layer->bias) &&
                     common.at("iteration").value().toInt() == 200;
  const auto args = dcpp::python_attributes_of(common.at("args").value());
  const c10::IValue* params_dtype = nullptr;
  for (const auto& [name, value] : args.value_or(decltype(args)::value_type{})) {
    if (name == "params_dtype") params_dtype = &value;
  }
  const bool bf16 = params_dtype != nullptr && dcpp::torch_dtype_of(*params_dtype) == at::kBFloat16;
  std::cout << "resumed from " << info->path.string() << " (iteration "
            << common.at("iteration").value().toInt() << ", hidden_size "
            << dcpp::python_object_of(common.at("args").value())->find("hidden_size")->toInt()
            << ", params_dtype " << (bf16 ? "torch.bfloat16" : "?")
            << "): " << (equal && bf16 ? "every value equal" : "VALUES DIFFER") << "\n";
  return equal && bf16 ? 0 : 1;
}
