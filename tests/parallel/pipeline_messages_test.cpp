// What a pipeline stage receives from its neighbours (parallel/src/pipeline_stage.cpp), on rank
// threads over loopback Gloo: activations arrive on the stage's own device, and a header no
// PipelineStage sends is a CheckpointError, never a tensor made of it (issue 59, finding 2).
// tests/cuda runs CUDA stages.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/parallel/pipeline_stage.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

namespace {

torch::nn::Sequential two_stage_model() {
  torch::manual_seed(59);
  return torch::nn::Sequential(torch::nn::Linear(6, 5), torch::nn::Tanh(), torch::nn::Linear(5, 3));
}

}  // namespace

TEST_CASE("two pipeline stages compute what the whole model computes, gradients included") {
  torch::nn::Sequential whole = two_stage_model();
  const at::Tensor input = at::randn({4, 6});
  const at::Tensor expected = whole->forward(input);
  expected.sum().backward();

  // Each rank's copy is made here: the rank threads would share the seeded global generator.
  std::vector<torch::nn::Sequential> models{two_stage_model(), two_stage_model()};
  std::vector<at::Tensor> outputs(2);
  std::vector<at::Tensor> first_grads(2);
  dcpp::test::on_ranks(2, "pipeline", [&](int rank, const auto& group) {
    torch::nn::Sequential& model = models[rank];
    const auto [begin, end] = dcpp::PipelineStage::even_bounds(3, rank, 2);
    dcpp::PipelineStage stage(dcpp::PipelineStage::slice(model, begin, end), begin, group);
    outputs[rank] = stage.forward(rank == 0 ? input : at::Tensor());
    stage.backward(rank == 1 ? outputs[rank].sum() : at::Tensor());
    first_grads[rank] = model->parameters()[0].grad();
  });
  CHECK(dcpp::test::bitwise_equal(outputs[1].detach(), expected.detach()));
  CHECK(dcpp::test::bitwise_equal(first_grads[0], whole->parameters()[0].grad()));
}

TEST_CASE("a pipeline header of an unknown dtype, rank count or size is refused") {
  const std::vector<std::vector<int64_t>> bad_headers = {
      {999, 1, 4, 0, 0, 0, 0, 0, 0, 0},  // no such dtype
      {static_cast<int64_t>(at::ScalarType::Undefined), 1, 4, 0, 0, 0, 0, 0, 0, 0},
      {static_cast<int64_t>(at::kFloat), 9, 4, 0, 0, 0, 0, 0, 0, 0},   // 9 dimensions
      {static_cast<int64_t>(at::kFloat), 2, 4, -3, 0, 0, 0, 0, 0, 0},  // a negative size
  };
  for (const std::vector<int64_t>& header : bad_headers) {
    INFO("header dtype " << header[0] << ", " << header[1] << " dimensions");
    std::string error = "none";
    dcpp::test::on_ranks(2, "bad-header", [&](int rank, const auto& group) {
      if (rank == 0) {
        std::vector<at::Tensor> message{at::tensor(header, at::kLong)};
        group->send(message, 1, /*tag=*/0)->wait();
        return;
      }
      dcpp::PipelineStage stage(torch::nn::Sequential(torch::nn::Linear(4, 4)), 1, group);
      try {
        stage.forward(at::Tensor());
      } catch (const dcpp::CheckpointError& e) {
        error = std::string(dcpp::to_string(e.kind())) + ": " + e.what_without_backtrace();
      }
    });
    CHECK(error ==
          "usage: PipelineStage on rank 1 of 2: received a bad header for the "
          "activations from rank 0");
  }
}
