#pragma once
// The layout of a model that is not parallelized: every parameter and buffer whole, on this
// process alone.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_layout.h>

#include <memory>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace dcpp {

/// `module`'s named_parameters() then named_buffers(), whole, with the FQNs libtorch gives them
/// ("0.weight" in a Sequential, "fc1.bias" for a registered submodule: the names Python gives the
/// same model). The placements are taken when this is called and share storage with the module's
/// tensors, so the layout stays valid if the module is destroyed; call it again after registering
/// new parameters. No process group. Not thread-safe against concurrent changes to `module`.
DCPP_API std::shared_ptr<ModelLayout> plain_layout(torch::nn::Module& module);

}  // namespace dcpp
