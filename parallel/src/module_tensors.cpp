#include "module_tensors.h"

namespace dcpp::detail {

std::vector<NamedTensor> module_tensors(const torch::nn::Module& module) {
  std::vector<NamedTensor> out;
  for (const auto& item : module.named_modules("", /*include_self=*/true)) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& param : item.value()->named_parameters(/*recurse=*/false)) {
      if (param.value().defined()) {
        out.push_back({prefix + param.key(), param.value(), false});
      }
    }
    for (const auto& buffer : item.value()->named_buffers(/*recurse=*/false)) {
      if (buffer.value().defined()) {
        out.push_back({prefix + buffer.key(), buffer.value(), true});
      }
    }
  }
  return out;
}

std::vector<ParameterPlacement> whole_placements(const torch::nn::Module& module) {
  std::vector<ParameterPlacement> out;
  for (NamedTensor& named : module_tensors(module)) {
    ParameterPlacement placement;
    placement.fqn = std::move(named.fqn);
    placement.local = std::move(named.tensor);
    placement.is_buffer = named.is_buffer;
    out.push_back(std::move(placement));
  }
  return out;
}

}  // namespace dcpp::detail
