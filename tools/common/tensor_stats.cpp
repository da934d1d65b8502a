// Stats fold chunk by chunk: sums and counts add, minima and maxima compare, and the mean is the
// sum over the count of non-NaN elements, so the order chunks arrive in changes only rounding.

#include "common/tensor_stats.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/planner/load_planner.h>
#include <dcpp/storage/storage_reader.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>

namespace dcpp::tools {

void StatsAccumulator::add(const at::Tensor& piece) {
  at::Tensor values = piece.is_complex() ? piece.abs() : piece;
  values = values.to(at::kDouble).reshape({-1});
  const at::Tensor is_nan = values.isnan();
  stats_.nan += is_nan.sum().item<int64_t>();
  stats_.inf += values.isinf().sum().item<int64_t>();
  const at::Tensor kept = values.masked_select(is_nan.logical_not());
  stats_.sum += kept.sum().item<double>();
  stats_.abs_sum += kept.abs().sum().item<double>();
  if (kept.numel() > 0) {
    const double min = kept.min().item<double>();
    const double max = kept.max().item<double>();
    stats_.min = stats_.min ? std::min(*stats_.min, min) : min;
    stats_.max = stats_.max ? std::max(*stats_.max, max) : max;
    counted_ += kept.numel();
  }
}

void StatsAccumulator::merge(const StatsAccumulator& other) {
  const TensorStats& s = other.stats_;
  stats_.sum += s.sum;
  stats_.abs_sum += s.abs_sum;
  stats_.nan += s.nan;
  stats_.inf += s.inf;
  if (s.min) stats_.min = stats_.min ? std::min(*stats_.min, *s.min) : *s.min;
  if (s.max) stats_.max = stats_.max ? std::max(*stats_.max, *s.max) : *s.max;
  counted_ += other.counted_;
}

TensorStats StatsAccumulator::result() const {
  TensorStats stats = stats_;
  if (counted_ > 0) {
    stats.mean = stats.sum / static_cast<double>(counted_);
  }
  return stats;
}

TensorStats compute_stats(const at::Tensor& tensor) {
  StatsAccumulator accumulator;
  accumulator.add(tensor);
  return accumulator.result();
}

namespace {

// Reads every saved chunk whole into a scratch tensor and folds it into its tensor's stats.
class StatsLoadPlanner final : public LoadPlanner {
 public:
  void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) override {
    metadata_ = &metadata;
    for (const auto& [key, stored] : metadata.state_dict_metadata) {
      if (const auto* tensor = std::get_if<TensorStorageMetadata>(&stored)) {
        dtypes_[key] = tensor->properties.dtype;
        stats_[key];  // a tensor with no chunk still has (empty) stats
      }
    }
  }
  LoadPlan create_local_plan() override {
    LoadPlan plan;
    for (const auto& [key, stored] : metadata_->state_dict_metadata) {
      const auto* tensor = std::get_if<TensorStorageMetadata>(&stored);
      if (tensor == nullptr) continue;
      for (std::size_t i = 0; i < tensor->chunks.size(); ++i) {
        const ChunkStorageMetadata& chunk = tensor->chunks[i];
        ReadItem item;
        item.type = LoadItemType::kTensor;
        item.dest_index = MetadataIndex{key, chunk.offsets, static_cast<int64_t>(i)};
        item.dest_offsets.assign(chunk.offsets.size(), 0);
        item.storage_index = item.dest_index;
        item.storage_offsets.assign(chunk.offsets.size(), 0);
        item.lengths = chunk.sizes;
        plan.items.push_back(std::move(item));
      }
    }
    return plan;
  }
  std::vector<LoadPlan> create_global_plan(std::vector<LoadPlan> plans) override { return plans; }
  LoadPlan finish_plan(LoadPlan central_plan) override { return central_plan; }
  at::Tensor resolve_tensor(const ReadItem& item) override {
    return at::empty(item.lengths, at::TensorOptions().dtype(dtypes_.at(item.dest_index.fqn)));
  }
  void commit_tensor(const ReadItem& item, const at::Tensor& tensor) override {
    StatsAccumulator piece;
    piece.add(tensor);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.at(item.dest_index.fqn).merge(piece);
  }
  void load_bytes(const ReadItem& item, c10::IValue value) override {}
  IncompatibleKeys report() const override { return {}; }

  std::map<std::string, TensorStats> result() const {
    std::map<std::string, TensorStats> out;
    for (const auto& [key, accumulator] : stats_) {
      out.emplace(key, accumulator.result());
    }
    return out;
  }

 private:
  const Metadata* metadata_ = nullptr;
  std::map<std::string, at::ScalarType> dtypes_;
  std::mutex mutex_;
  std::map<std::string, StatsAccumulator> stats_;
};

}  // namespace

std::map<std::string, TensorStats> checkpoint_tensor_stats(StorageReader& reader) {
  auto planner = std::make_shared<StatsLoadPlanner>();
  LoadOptions options;
  options.planner = planner;
  StateDict nothing;
  load(nothing, reader, options);
  return planner->result();
}

}  // namespace dcpp::tools
