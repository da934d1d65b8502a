#include "training_setup.h"

#include <dcpp/parallel/data_parallel.h>
#include <dcpp/parallel/fully_sharded_data_parallel.h>
#include <dcpp/parallel/pipeline_stage.h>
#include <dcpp/parallel/tensor_parallel.h>
#include <dcpp/parallel/tensor_parallel_layers.h>
#include <dcpp/state_dict/plain_layout.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/utils.h>

#include <cstdio>
#include <stdexcept>

namespace dcpp::test {

namespace {

// A pre-norm transformer block: x + attention(norm(x)), then x + MLP(norm(x)). Attention has no
// biases: a key bias shifts every score of a query alike, so its gradient is zero in exact
// arithmetic and Adam would steer it by rounding noise alone, which no change of layout reproduces.
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(int64_t dim, int64_t heads, int64_t hidden)
      : norm1_(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        attn_(register_module("attn",
                              torch::nn::MultiheadAttention(
                                  torch::nn::MultiheadAttentionOptions(dim, heads).bias(false)))),
        norm2_(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        fc1_(register_module("fc1", torch::nn::Linear(dim, hidden))),
        fc2_(register_module("fc2", torch::nn::Linear(hidden, dim))) {}

  // x: (sequence, batch, dim).
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = norm1_(x);
    const at::Tensor y = x + std::get<0>(attn_(h, h, h));
    return y + fc2_(at::gelu(fc1_(norm2_(y))));
  }

 private:
  torch::nn::LayerNorm norm1_;
  torch::nn::MultiheadAttention attn_;
  torch::nn::LayerNorm norm2_;
  torch::nn::Linear fc1_, fc2_;
};
TORCH_MODULE(TransformerBlock);

// The part of the global batch data-parallel rank `rank` of `world` trains on.
Batch local_part(const ModelSpec& spec, const Batch& batch, int rank, int world) {
  const int64_t part = kGlobalBatch / world;
  return {batch.inputs.narrow(spec.batch_dim, rank * part, part),
          batch.targets.narrow(spec.batch_dim, rank * part, part)};
}

// Mean of the ranks' losses (each the mean over an equal part): the mean over the global batch.
double mean_over_ranks(const at::Tensor& loss, c10d::ProcessGroup& group) {
  std::vector<at::Tensor> value{loss.detach().to(at::kDouble).reshape({1}).clone()};
  group.allreduce(value)->wait();
  return value[0].item<double>() / group.getSize();
}

class SingleTrainer : public Trainer {
 public:
  explicit SingleTrainer(torch::nn::Sequential model) : model_(std::move(model)) {}
  const ModelLayout& layout() const override { return *layout_; }
  std::vector<at::Tensor> parameters() const override { return model_->parameters(); }
  double forward_backward(const Batch& batch) override {
    at::Tensor loss = at::mse_loss(model_->forward(batch.inputs), batch.targets);
    loss.backward();
    return loss.item<double>();
  }

 private:
  torch::nn::Sequential model_;
  std::shared_ptr<ModelLayout> layout_ = plain_layout(*model_);
};

class DataParallelTrainer : public Trainer {
 public:
  DataParallelTrainer(const ModelSpec& spec, torch::nn::Sequential model,
                      c10::intrusive_ptr<c10d::ProcessGroup> group)
      : spec_(spec), model_(model), ddp_(model.ptr(), group), group_(std::move(group)) {}
  const ModelLayout& layout() const override { return ddp_; }
  std::vector<at::Tensor> parameters() const override { return ddp_.parameters(); }
  double forward_backward(const Batch& batch) override {
    const Batch mine = local_part(spec_, batch, group_->getRank(), group_->getSize());
    at::Tensor loss = at::mse_loss(model_->forward(mine.inputs), mine.targets);
    loss.backward();
    ddp_.synchronize_gradients();
    return mean_over_ranks(loss, *group_);
  }

 private:
  ModelSpec spec_;
  torch::nn::Sequential model_;
  DataParallel ddp_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

class FullyShardedTrainer : public Trainer {
 public:
  // The data split over `group`; the model sharded over `shard_group` (`group` when null) and
  // replicated over `replicate_group` (HSDP).
  FullyShardedTrainer(const ModelSpec& spec, torch::nn::Sequential model,
                      c10::intrusive_ptr<c10d::ProcessGroup> group,
                      const c10::intrusive_ptr<c10d::ProcessGroup>& shard_group = {},
                      const c10::intrusive_ptr<c10d::ProcessGroup>& replicate_group = {})
      : spec_(spec),
        model_(model),
        fsdp_(model.ptr(), shard_group ? shard_group : group, replicate_group),
        group_(std::move(group)) {}
  const ModelLayout& layout() const override { return fsdp_; }
  std::vector<at::Tensor> parameters() const override { return fsdp_.parameters(); }
  double forward_backward(const Batch& batch) override {
    const Batch mine = local_part(spec_, batch, group_->getRank(), group_->getSize());
    fsdp_.gather_parameters();
    at::Tensor loss = at::mse_loss(model_->forward(mine.inputs), mine.targets);
    loss.backward();
    fsdp_.reduce_gradients();
    return mean_over_ranks(loss, *group_);
  }

 private:
  ModelSpec spec_;
  torch::nn::Sequential model_;
  FullyShardedDataParallel fsdp_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

class PipelineTrainer : public Trainer {
 public:
  PipelineTrainer(const torch::nn::Sequential& whole, c10::intrusive_ptr<c10d::ProcessGroup> group)
      : stage_(make_stage(whole, group)) {}
  const ModelLayout& layout() const override { return stage_; }
  std::vector<at::Tensor> parameters() const override { return stage_.parameters(); }
  double forward_backward(const Batch& batch) override {
    const at::Tensor out = stage_.forward(batch.inputs);
    at::Tensor loss = stage_.is_last() ? at::mse_loss(out, batch.targets) : at::zeros({});
    stage_.backward(loss);
    return stage_.broadcast_from_last(loss.detach().to(at::kDouble)).item<double>();
  }

 private:
  static PipelineStage make_stage(const torch::nn::Sequential& whole,
                                  const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
    const auto [begin, end] =
        PipelineStage::even_bounds(whole->size(), group->getRank(), group->getSize());
    return PipelineStage(PipelineStage::slice(whole, begin, end), begin, group);
  }

  PipelineStage stage_;
};

// Modules [begin, end) of the MLP (Linear(6, 16), Tanh, Linear(16, 16), Tanh, Linear(16, 2)) with
// its first layer column-parallel and its second row-parallel over `tp` (Megatron's MLP), the
// others shared with `whole`: the names stay the model's.
torch::nn::Sequential tensor_parallel_modules(const ModelSpec& spec,
                                              const torch::nn::Sequential& whole, int64_t begin,
                                              int64_t end,
                                              const c10::intrusive_ptr<c10d::ProcessGroup>& tp) {
  if (spec.name != "mlp") {
    throw std::invalid_argument("the tensor-parallel layouts train the MLP only");
  }
  torch::nn::Sequential out;
  for (int64_t i = begin; i < end; ++i) {
    if (i == 0) {
      out->push_back(
          ColumnParallelLinear(torch::nn::Linear(whole->ptr<torch::nn::LinearImpl>(0)), tp));
    } else if (i == 2) {
      out->push_back(
          RowParallelLinear(torch::nn::Linear(whole->ptr<torch::nn::LinearImpl>(2)), tp));
    } else {
      out->push_back(*(whole->begin() + i));
    }
  }
  return out;
}

// A pipeline stage whose modules are tensor parallel x data parallel (TP x DP x PP) or fully
// sharded (FSDP x PP), on a mesh {"pp", "dp"[, "tp"]}: the data split over "dp".
class PipelinedTrainer : public Trainer {
 public:
  PipelinedTrainer(const ModelSpec& spec, const torch::nn::Sequential& whole,
                   const DeviceMesh& mesh, bool tensor_parallel)
      : spec_(spec), data_group_(mesh.group("dp")) {
    const auto pp = mesh.group("pp");
    const auto [begin, end] =
        PipelineStage::even_bounds(whole->size(), pp->getRank(), pp->getSize());
    torch::nn::Sequential modules =
        tensor_parallel ? tensor_parallel_modules(spec, whole, begin, end, mesh.group("tp"))
                        : PipelineStage::slice(whole, begin, end);
    std::shared_ptr<const ModelLayout> within;
    if (tensor_parallel) {
      tp_ = std::make_shared<TensorParallel>(modules.ptr(), mesh.group("tp"), data_group_);
      within = tp_;
    } else {
      fsdp_ = std::make_shared<FullyShardedDataParallel>(modules.ptr(), data_group_);
      within = fsdp_;
    }
    stage_ = std::make_unique<PipelineStage>(modules, begin, pp, within);
  }
  const ModelLayout& layout() const override { return *stage_; }
  std::vector<at::Tensor> parameters() const override {
    return tp_ ? tp_->parameters() : fsdp_->parameters();
  }
  double forward_backward(const Batch& batch) override {
    const Batch mine = local_part(spec_, batch, data_group_->getRank(), data_group_->getSize());
    if (fsdp_) fsdp_->gather_parameters();
    const at::Tensor out = stage_->forward(mine.inputs);
    at::Tensor loss = stage_->is_last() ? at::mse_loss(out, mine.targets) : at::zeros({});
    stage_->backward(loss);
    if (tp_) tp_->synchronize_gradients();
    if (fsdp_) fsdp_->reduce_gradients();
    return mean_over_ranks(stage_->broadcast_from_last(loss.detach().to(at::kDouble)),
                           *data_group_);
  }

 private:
  ModelSpec spec_;
  c10::intrusive_ptr<c10d::ProcessGroup> data_group_;
  std::shared_ptr<TensorParallel> tp_;
  std::shared_ptr<FullyShardedDataParallel> fsdp_;
  std::unique_ptr<PipelineStage> stage_;
};

// Megatron-style tensor parallel x data parallel: the MLP's first layer column-parallel, its
// second row-parallel (Megatron's MLP), the last whole; the data split over "dp".
class TensorParallelTrainer : public Trainer {
 public:
  TensorParallelTrainer(const ModelSpec& spec, const torch::nn::Sequential& whole,
                        const DeviceMesh& mesh)
      : spec_(spec),
        model_(split(spec, whole, mesh.group("tp"))),
        tp_(model_.ptr(), mesh.group("tp"), mesh.group("dp")),
        data_group_(mesh.group("dp")) {}
  const ModelLayout& layout() const override { return tp_; }
  std::vector<at::Tensor> parameters() const override { return tp_.parameters(); }
  double forward_backward(const Batch& batch) override {
    const Batch mine = local_part(spec_, batch, data_group_->getRank(), data_group_->getSize());
    at::Tensor loss = at::mse_loss(model_->forward(mine.inputs), mine.targets);
    loss.backward();
    tp_.synchronize_gradients();
    return mean_over_ranks(loss, *data_group_);
  }

 private:
  static torch::nn::Sequential split(const ModelSpec& spec, const torch::nn::Sequential& whole,
                                     const c10::intrusive_ptr<c10d::ProcessGroup>& tp) {
    return tensor_parallel_modules(spec, whole, 0, static_cast<int64_t>(whole->size()), tp);
  }

  ModelSpec spec_;
  torch::nn::Sequential model_;
  TensorParallel tp_;
  c10::intrusive_ptr<c10d::ProcessGroup> data_group_;
};

}  // namespace

ModelSpec model_spec(const std::string& name) {
  const std::string suffix = "-f64";
  const bool f64 = name.size() > suffix.size() &&
                   name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string base = f64 ? name.substr(0, name.size() - suffix.size()) : name;
  const at::ScalarType dtype = f64 ? at::kDouble : at::kFloat;
  if (base == "mlp") return {base, 0, dtype};
  if (base == "transformer") return {base, 1, dtype};  // (sequence, batch, features)
  throw std::invalid_argument("unknown model '" + name + "' (mlp, transformer, with -f64 or not)");
}

torch::nn::Sequential make_model(const ModelSpec& spec, uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential model;
  if (spec.name == "mlp") {
    // The last layer has 2 rows: on 3 FSDP ranks, one rank holds none of its weight.
    model = torch::nn::Sequential(torch::nn::Linear(6, 16), torch::nn::Tanh(),
                                  torch::nn::Linear(16, 16), torch::nn::Tanh(),
                                  torch::nn::Linear(16, 2));
  } else {
    model = torch::nn::Sequential(torch::nn::Linear(6, 8), TransformerBlock(8, 2, 16),
                                  torch::nn::Linear(8, 2));
  }
  model->to(spec.dtype);
  return model;
}

// The data in float32 (whatever the model's dtype), so that float64 runs see the same numbers.
Batch global_batch_f32(const ModelSpec& spec, int64_t step) {
  const auto phase = static_cast<double>(step);
  if (spec.name == "mlp") {
    return {at::arange(kGlobalBatch * 6, at::kFloat).mul(0.7).add(phase * 1.3).sin().view({-1, 6}),
            at::arange(kGlobalBatch * 2, at::kFloat)
                .mul(0.3)
                .add(phase * 0.9)
                .cos()
                .mul(0.5)
                .view({-1, 2})};
  }
  constexpr int64_t kSequence = 4;
  return {at::arange(kSequence * kGlobalBatch * 6, at::kFloat)
              .mul(0.7)
              .add(phase * 1.3)
              .sin()
              .view({kSequence, kGlobalBatch, 6}),
          at::arange(kSequence * kGlobalBatch * 2, at::kFloat)
              .mul(0.3)
              .add(phase * 0.9)
              .cos()
              .mul(0.5)
              .view({kSequence, kGlobalBatch, 2})};
}

Batch global_batch(const ModelSpec& spec, int64_t step) {
  Batch batch = global_batch_f32(spec, step);
  return {batch.inputs.to(spec.dtype), batch.targets.to(spec.dtype)};
}

std::optional<MeshShape> mesh_shape_of(const std::string& layout) {
  int64_t first = 0, second = 0, third = 0;
  char end = 0;
  if (std::sscanf(layout.c_str(), "tp%lddp%ldpp%ld%c", &first, &second, &third, &end) == 3) {
    return MeshShape{{third, second, first}, {"pp", "dp", "tp"}};
  }
  if (std::sscanf(layout.c_str(), "fsdp%ldpp%ld%c", &first, &second, &end) == 2) {
    return MeshShape{{second, first}, {"pp", "dp"}};
  }
  if (std::sscanf(layout.c_str(), "tp%lddp%ld%c", &first, &second, &end) == 2) {
    return MeshShape{{second, first}, {"dp", "tp"}};
  }
  if (std::sscanf(layout.c_str(), "hsdp%ldx%ld%c", &first, &second, &end) == 2) {
    return MeshShape{{first, second}, {"replicate", "shard"}};
  }
  return std::nullopt;
}

std::unique_ptr<Trainer> make_trainer(const std::string& layout, const ModelSpec& spec,
                                      uint64_t seed,
                                      const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                      const DeviceMesh* mesh) {
  torch::nn::Sequential model = make_model(spec, seed);
  if (layout == "single") return std::make_unique<SingleTrainer>(model);
  if (layout == "ddp") return std::make_unique<DataParallelTrainer>(spec, model, group);
  if (layout == "fsdp") return std::make_unique<FullyShardedTrainer>(spec, model, group);
  if (layout == "pipeline") return std::make_unique<PipelineTrainer>(model, group);
  if (mesh != nullptr && layout.find("pp") != std::string::npos) {
    return std::make_unique<PipelinedTrainer>(spec, model, *mesh, layout.rfind("tp", 0) == 0);
  }
  if (mesh != nullptr && layout.rfind("tp", 0) == 0) {
    return std::make_unique<TensorParallelTrainer>(spec, model, *mesh);
  }
  if (mesh != nullptr && layout.rfind("hsdp", 0) == 0) {
    // Every rank of the mesh a data-parallel rank: the batch split over the world.
    return std::make_unique<FullyShardedTrainer>(spec, model, group, mesh->group("shard"),
                                                 mesh->group("replicate"));
  }
  throw std::invalid_argument("unknown layout '" + layout +
                              "' (single, ddp, fsdp, pipeline, tp<T>dp<D>, hsdp<R>x<S>)");
}

}  // namespace dcpp::test
