#pragma once
// Private: the codecs of libtorch's own optimizers (SGD, Adam, AdamW, Adagrad, RMSprop, LBFGS),
// with the names and types of their Python counterparts in PyTorch 2.6.

#include <dcpp/state_dict/optimizer_state_codec.h>

namespace dcpp::detail {

/// The codec of the built-in optimizer `optimizer` is (or derives from), or null.
std::shared_ptr<const OptimizerStateCodec> builtin_optimizer_state_codec(
    const torch::optim::Optimizer& optimizer);

}  // namespace dcpp::detail
