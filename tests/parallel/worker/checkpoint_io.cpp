#include "checkpoint_io.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/optimizer_state_dict.h>

namespace dcpp::test {

namespace {

// As docs/state_dict.md says: a pipeline stage saves the flat layout (in the nested one a param
// group lists its parameters, which differ from one pipeline stage to the next, so the ranks of a
// pipeline would save different values under one key), every other layout the nested one. The
// load takes whichever layout the checkpoint has, so every layout resumes from every other.
StateDictOptions optimizer_options(const ModelLayout& layout) {
  return StateDictOptions().with_flatten_optimizer_state_dict(layout.stage_group() != nullptr);
}

}  // namespace

StateDict tensors_of(const ModelLayout& layout) {
  // Built from the placements directly (not by the helpers under test): what each process holds.
  StateDict out;
  for (const ParameterPlacement& placement : layout.placements()) {
    const at::Tensor tensor = placement.local.detach();
    if (placement.is_sharded()) {
      out.insert(placement.fqn,
                 ShardedTensor(placement.global_shape, {Shard{tensor, placement.offsets}},
                               tensor.scalar_type()));
    } else {
      out.insert(placement.fqn, tensor);
    }
  }
  return out;
}

void save_training(const ModelLayout& layout, torch::optim::Optimizer& optimizer,
                   const std::string& directory,
                   const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  StateDict state;
  state.insert("model", get_model_state_dict(layout));
  state.insert("optim", get_optimizer_state_dict(layout, optimizer, optimizer_options(layout)));
  SaveOptions options;
  options.ranks.process_group = group;
  options.file_system.sync_files = false;
  save(state, directory, options);
}

void load_training(const ModelLayout& layout, torch::optim::Optimizer& optimizer,
                   const std::string& directory,
                   const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  // The targets: this layout's own state dicts (the optimizer's state created as DCP does), which
  // dcpp::load fills from whatever layout saved the checkpoint.
  StateDict state;
  state.insert("model", get_model_state_dict(layout));
  state.insert("optim", get_optimizer_state_dict(layout, optimizer, optimizer_options(layout)));
  LoadOptions options;
  options.ranks.process_group = group;
  load(state, directory, options);
  set_model_state_dict(layout, state.at("model").dict());
  set_optimizer_state_dict(layout, optimizer, state.at("optim").dict(), optimizer_options(layout));
}

}  // namespace dcpp::test
