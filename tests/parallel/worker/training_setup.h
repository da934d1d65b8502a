#pragma once
// The deterministic training problem the parallel tests share: two small models (an MLP and a
// transformer block), a generated data set, and the same step in every layout.

#include <dcpp/dist/device_mesh.h>
#include <dcpp/state_dict/model_layout.h>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::test {

/// A model of the tests: a Sequential, and along which dimension its inputs hold the batch.
struct ModelSpec {
  std::string name;  // "mlp" or "transformer"
  int64_t batch_dim;
  at::ScalarType dtype = at::kFloat;
};
/// "mlp", "transformer", or either with "-f64" appended: parameters and data in float64.
ModelSpec model_spec(const std::string& name);

/// The whole model, its parameters drawn from `seed` (the same on every process).
torch::nn::Sequential make_model(const ModelSpec& spec, uint64_t seed);

/// The global batch of step `step`: inputs and targets, the same on every process.
struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
};
Batch global_batch(const ModelSpec& spec, int64_t step);
constexpr int64_t kGlobalBatch = 12;  // divisible by every data-parallel world size tested

/// One layout training the model: the ModelLayout it describes, the tensors its optimizer steps,
/// and one training step (forward, backward, gradient exchange; not the optimizer step) that
/// returns the loss: the mean over the global batch, the same on every process.
class Trainer {
 public:
  virtual ~Trainer() = default;
  virtual const ModelLayout& layout() const = 0;
  virtual std::vector<at::Tensor> parameters() const = 0;
  virtual double forward_backward(const Batch& batch) = 0;
};

/// The DeviceMesh an N-D layout trains on: "tp<T>dp<D>" (shape {D, T} named {"dp", "tp"}),
/// "tp<T>dp<D>pp<P>" ({P, D, T}, {"pp", "dp", "tp"}), "fsdp<D>pp<P>" ({P, D}, {"pp", "dp"}),
/// "hsdp<R>x<S>" ({R, S}, {"replicate", "shard"}); nullopt for the 1-D layouts.
struct MeshShape {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
};
std::optional<MeshShape> mesh_shape_of(const std::string& layout);

/// LAYOUT: single (this process alone), ddp, fsdp, pipeline (over `group`'s ranks); on `mesh` (of
/// mesh_shape_of(LAYOUT)): tp<T>dp<D> (TensorParallel, the MLP's first two layers column- and
/// row-parallel), tp<T>dp<D>pp<P> and fsdp<D>pp<P> (pipeline stages of those), hsdp<R>x<S>.
std::unique_ptr<Trainer> make_trainer(const std::string& layout, const ModelSpec& spec,
                                      uint64_t seed,
                                      const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                      const DeviceMesh* mesh = nullptr);

}  // namespace dcpp::test
