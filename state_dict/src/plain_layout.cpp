#include <dcpp/state_dict/plain_layout.h>

#include <torch/nn/module.h>

namespace dcpp {

namespace {

class PlainLayout final : public ModelLayout {
 public:
  explicit PlainLayout(std::vector<ParameterPlacement> placements)
      : placements_(std::move(placements)) {}
  std::vector<ParameterPlacement> placements() const override { return placements_; }

 private:
  std::vector<ParameterPlacement> placements_;
};

}  // namespace

std::shared_ptr<ModelLayout> plain_layout(torch::nn::Module& module) {
  std::vector<ParameterPlacement> placements;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    ParameterPlacement placement;
    placement.fqn = item.key();
    placement.local = item.value();
    placements.push_back(std::move(placement));
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    ParameterPlacement placement;
    placement.fqn = item.key();
    placement.local = item.value();
    placement.is_buffer = true;
    placements.push_back(std::move(placement));
  }
  return std::make_shared<PlainLayout>(std::move(placements));
}

}  // namespace dcpp
