// Staging one state dict: resolve Stateful objects (on the calling thread), match each tensor (and
// shard) to a reusable buffer, and copy in pieces. Contiguous CPU tensors are copied with memcpy in
// byte ranges, so several threads can share one large tensor; a tensor on CUDA is one piece, its
// copy into pinned memory enqueued on the stager's stream when the job is prepared and waited for
// by the piece (device_copies.h); anything else (non-contiguous) is one piece copied by libtorch
// (synchronously, so the copy is complete when it returns).

#include "staging_job.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful_swap.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace dcpp::detail {

namespace {

std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

// Rebuilds `value`, a state dict whose Statefuls are resolved already, with every tensor and
// shard replaced by visit(tensor, key).
template <typename Visit>
StateValue rebuild(const StateValue& value, const std::string& key, Visit& visit) {
  switch (value.kind()) {
    case StateValue::Kind::kTensor:
      return StateValue(visit(value.tensor(), key));
    case StateValue::Kind::kShardedTensor: {
      const ShardedTensor& sharded = value.sharded_tensor();
      std::vector<Shard> shards;
      for (std::size_t i = 0; i < sharded.local_shards().size(); ++i) {
        const Shard& shard = sharded.local_shards()[i];
        shards.push_back(
            Shard{visit(shard.tensor, key + " (shard " + std::to_string(i) + ")"), shard.offsets});
      }
      return ShardedTensor(sharded.global_shape(), std::move(shards), sharded.dtype());
    }
    case StateValue::Kind::kDict: {
      StateDict copy;
      for (const auto& item : value.dict()) {
        copy.insert(item.key, rebuild(item.value, join(key, item.key), visit));
      }
      return copy;
    }
    case StateValue::Kind::kList: {
      StateList copy;
      for (std::size_t i = 0; i < value.list().size(); ++i) {
        copy.push_back(rebuild(value.list()[i], join(key, std::to_string(i)), visit));
      }
      return copy;
    }
    case StateValue::Kind::kStateful:  // resolved before staging (resolve_statefuls)
    case StateValue::Kind::kValue:
      break;
  }
  return value;  // None, bool, int, float, string, tuple: immutable, shared as is
}

}  // namespace

const std::vector<at::Tensor>& StagingBuffers::buffers_for(const std::vector<BufferSpec>& specs) {
  if (specs == specs_ && buffers_.size() == specs.size()) {
    return buffers_;
  }
  buffers_.clear();  // release the old set before allocating the new one
  specs_.clear();
  bytes_ = 0;
  buffers_.reserve(specs.size());
  for (const BufferSpec& spec : specs) {
    buffers_.push_back(spec.pinned ? DeviceCopies::pinned_buffer(spec.dtype, spec.sizes)
                                   : at::empty(spec.sizes, at::TensorOptions().dtype(spec.dtype)));
    const int64_t bytes =
        buffers_.back().numel() * static_cast<int64_t>(buffers_.back().element_size());
    bytes_ += spec.pinned ? DeviceCopies::pinned_length(bytes) : bytes;
  }
  specs_ = specs;
  ++allocations_;
  return buffers_;
}

std::shared_ptr<StagingJob> StagingJob::prepare(const StateDict& state_dict,
                                                StagingBuffers& buffers, int64_t piece_bytes) {
  auto job = std::make_shared<StagingJob>();
  piece_bytes = std::max<int64_t>(piece_bytes, 4096);

  // Pass 1: resolve Stateful objects and list the tensors, in traversal order.
  std::vector<BufferSpec> specs;
  auto collect = [&](const at::Tensor& tensor, const std::string& key) -> at::Tensor {
    if (!tensor.defined()) {
      throw CheckpointError(ErrorKind::kUsage, "staging key '" + key +
                                                   "': the tensor is undefined; give it a value "
                                                   "or remove it from the state dict");
    }
    if (tensor.layout() != at::kStrided) {
      throw CheckpointError(ErrorKind::kUsage, "staging key '" + key +
                                                   "': only dense (strided) tensors can be "
                                                   "staged; convert it with to_dense() first");
    }
    const bool on_device = DeviceCopies::handles(tensor);
    if (!tensor.device().is_cpu() && !on_device) {
      throw CheckpointError(ErrorKind::kUsage,
                            "staging key '" + key + "': tensors on " + tensor.device().str() +
                                " cannot be staged by this build of dcpp; move it to the CPU");
    }
    specs.push_back(BufferSpec{tensor.scalar_type(), tensor.sizes().vec(), on_device});
    job->sources_.push_back(Source{tensor, at::Tensor(), key,
                                   tensor.device().is_cpu() && tensor.is_contiguous(), on_device});
    return tensor;
  };
  StateDict resolved;
  for (const auto& item : resolve_statefuls(state_dict)) {
    resolved.insert(item.key, rebuild(item.value, item.key, collect));
  }

  // Pass 2: the same tree over the staging buffers.
  const std::vector<at::Tensor>& staging = buffers.buffers_for(specs);
  std::size_t next = 0;
  auto substitute = [&](const at::Tensor&, const std::string&) -> at::Tensor {
    return staging[next++];
  };
  for (const auto& item : resolved) {
    job->staged_.insert(item.key, rebuild(item.value, item.key, substitute));
  }

  // The pieces: byte ranges of raw sources, whole non-raw sources (a device source's copy
  // enqueued now).
  job->device_copies_ = &buffers.device_copies();
  for (std::size_t i = 0; i < job->sources_.size(); ++i) {
    Source& source = job->sources_[i];
    source.buffer = staging[i];
    const int64_t bytes =
        source.tensor.numel() * static_cast<int64_t>(source.tensor.element_size());
    job->bytes_ += bytes;
    if (bytes == 0) {
      continue;
    }
    if (source.on_device) {
      try {
        job->device_copies_->enqueue(i, source.tensor, source.buffer);
      } catch (const c10::Error& error) {
        throw CheckpointError(ErrorKind::kIo, "staging key '" + source.key +
                                                  "': enqueueing its copy from " +
                                                  source.tensor.device().str() +
                                                  " failed: " + error.what_without_backtrace());
      }
    }
    if (!source.raw) {
      job->pieces_.push_back(Piece{i, 0, bytes});
      continue;
    }
    for (int64_t begin = 0; begin < bytes; begin += piece_bytes) {
      job->pieces_.push_back(Piece{i, begin, std::min(bytes, begin + piece_bytes)});
    }
  }
  return job;
}

void StagingJob::copy_piece(std::size_t index) noexcept {
  const Piece& piece = pieces_[index];
  Source& source = sources_[piece.source];
  try {
    if (source.on_device) {
      device_copies_->wait(piece.source);
    } else if (source.raw) {
      std::memcpy(static_cast<char*>(source.buffer.data_ptr()) + piece.begin,
                  static_cast<const char*>(source.tensor.data_ptr()) + piece.begin,
                  static_cast<std::size_t>(piece.end - piece.begin));
    } else {
      source.buffer.copy_(source.tensor, /*non_blocking=*/false);
    }
  } catch (const std::exception& error) {
    const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
    const std::string what = torch_error ? torch_error->what_without_backtrace() : error.what();
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) {
      error_ = std::make_exception_ptr(CheckpointError(
          ErrorKind::kIo,
          "staging key '" + source.key + "': copying it into its staging buffer failed: " + what));
    }
  }
}

void StagingJob::finish() {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (error_) {
    std::rethrow_exception(error_);
  }
  // The sources are no longer needed: the staged copy must not keep the caller's tensors alive.
  for (Source& source : sources_) {
    source.tensor = at::Tensor();
  }
}

void run_job_inline(StagingJob& job) {
  for (std::size_t i = 0; i < job.piece_count(); ++i) {
    job.copy_piece(i);
  }
  job.finish();
}

}  // namespace dcpp::detail
