// Read-once transfers (read_once_exchange.h). A transfer travels as messages of at most
// kBatchBytes of boxes (or one larger box), each encode_strings({status, box...}); a non-empty
// status is the sender's failure and ends the transfer.

#include "read_once_exchange.h"

#include "format/byte_io.h"
#include "format/item_codec.h"
#include "planner/plan_codec.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>

namespace dcpp::detail {

namespace {

constexpr std::size_t kBatchBytes = std::size_t{16} << 20;

std::string describe(const ReadItem& item) {
  std::string text = "key '" + item.storage_index.fqn + "'";
  if (item.type == LoadItemType::kTensor) {
    text += " (box at";
    for (int64_t offset : item.storage_offsets) text += " " + std::to_string(offset);
    text += " of sizes";
    for (int64_t length : item.lengths) text += " " + std::to_string(length);
    text += ")";
  }
  return text;
}

// The dtype each tensor key was saved in.
using SavedDtypes = std::unordered_map<std::string, at::ScalarType>;
SavedDtypes saved_dtypes(const Metadata& metadata) {
  SavedDtypes dtypes;
  for (const auto& [fqn, entry] : metadata.state_dict_metadata) {
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&entry)) {
      dtypes.emplace(fqn, tensor->properties.dtype);
    }
  }
  return dtypes;
}

at::ScalarType saved_dtype(const SavedDtypes& dtypes, const ReadItem& item) {
  const auto found = dtypes.find(item.storage_index.fqn);
  if (found == dtypes.end()) {
    throw CheckpointError(ErrorKind::kCorrupt, "checkpoint load: .metadata lists no tensor " +
                                                   describe(item) + " that a rank read once");
  }
  return found->second;
}

std::string tensor_bytes(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.to(at::kCPU).contiguous();
  return std::string(static_cast<const char*>(cpu.data_ptr()),
                     static_cast<std::size_t>(cpu.numel()) * cpu.element_size());
}

// Hands one received box (in the saved dtype) to `planner`, as the storage reader would have.
void apply(const ReadItem& item, const std::string& box, int from, const SavedDtypes& dtypes,
           LoadPlanner& planner) {
  const std::string what =
      "checkpoint load: rank " + std::to_string(from) + "'s copy of " + describe(item);
  if (item.type == LoadItemType::kBytes) {
    const MemorySource source(box, what);
    planner.load_bytes(item, read_bytes_item(source, /*verify_crc=*/true));
    return;
  }
  const at::ScalarType dtype = saved_dtype(dtypes, item);
  at::Tensor dest = planner.resolve_tensor(item);
  const auto expected = static_cast<std::size_t>(dest.numel()) * c10::elementSize(dtype);
  if (dest.sizes() != at::IntArrayRef(item.lengths) || box.size() != expected) {
    throw CheckpointError(ErrorKind::kCorrupt, what + " has " + std::to_string(box.size()) +
                                                   " bytes, where this rank's "
                                                   "destination takes " +
                                                   std::to_string(expected) +
                                                   "; every rank must run the same dcpp build");
  }
  if (expected > 0) {
    const at::Tensor source = at::from_blob(const_cast<char*>(box.data()), item.lengths,
                                            at::TensorOptions().dtype(dtype));
    dest.copy_(source);  // converts, as reading storage into `dest` would
  }
  planner.commit_tensor(item, dest);
}

void send_transfer(Collectives& ranks, const ReadOnceTransfer& transfer,
                   const StashingLoadPlanner* stash, std::exception_ptr& failure) {
  std::vector<std::string_view> batch{""};  // views of the stash's copies
  std::size_t batch_bytes = 0;
  for (const ReadItem& item : transfer.items) {
    const std::string* box = stash != nullptr ? stash->find(item) : nullptr;
    if (box == nullptr) {
      const std::string message = "rank " + std::to_string(ranks.rank()) + " kept no copy of " +
                                  describe(item) + " to send to rank " +
                                  std::to_string(transfer.to) +
                                  "; its planner did not hand it over while reading";
      ranks.send(encode_strings({message}), transfer.to);
      if (!failure) {
        failure = std::make_exception_ptr(
            CheckpointError(ErrorKind::kUsage, "checkpoint load: " + message));
      }
      return;
    }
    batch.push_back(*box);
    batch_bytes += box->size();
    if (batch_bytes >= kBatchBytes) {
      ranks.send(encode_string_views(batch), transfer.to);
      batch.assign(1, "");
      batch_bytes = 0;
    }
  }
  if (batch.size() > 1) {
    ranks.send(encode_string_views(batch), transfer.to);
  }
}

void receive_transfer(Collectives& ranks, const ReadOnceTransfer& transfer,
                      const SavedDtypes& dtypes, LoadPlanner& planner,
                      std::exception_ptr& failure) {
  std::size_t received = 0;
  while (received < transfer.items.size()) {
    const std::string bytes = ranks.receive(transfer.from);  // a dead sender throws from here
    std::vector<std::string> message;
    try {
      message = decode_strings(bytes);
      const bool placeable = !message.empty() &&
                             message.size() - 1 <= transfer.items.size() - received &&
                             (message.size() > 1 || !message.front().empty());
      if (!placeable) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              "checkpoint load: rank " + std::to_string(transfer.from) +
                                  " sent a read-once message this rank cannot place; every rank "
                                  "must run the same dcpp build");
      }
      if (!message.front().empty()) {
        throw CheckpointError(ErrorKind::kUsage, "checkpoint load: " + message.front());
      }
    } catch (const CheckpointError&) {
      // The sender sends nothing more of this transfer (or its messages cannot be followed).
      if (!failure) failure = std::current_exception();
      return;
    }
    for (std::size_t i = 1; i < message.size(); ++i, ++received) {
      if (failure) continue;  // keep receiving, placing nothing more
      try {
        apply(transfer.items[received], message[i], transfer.from, dtypes, planner);
      } catch (...) {
        failure = std::current_exception();
      }
    }
  }
}

}  // namespace

struct StashingLoadPlanner::Stash {
  /// The saved boxes to keep, with their tensors' saved dtype (values: unset).
  std::unordered_map<std::string, std::optional<at::ScalarType>> wanted;
  mutable std::mutex mutex;
  std::unordered_map<std::string, std::string> boxes;
  /// The destinations of the boxes being read into a scratch tensor of the saved dtype.
  std::unordered_map<std::string, at::Tensor> destinations;

  const std::optional<at::ScalarType>* find_wanted(const std::string& key) const {
    const auto found = wanted.find(key);
    return found == wanted.end() ? nullptr : &found->second;
  }
  void keep(std::string key, std::string box) {
    const std::lock_guard<std::mutex> lock(mutex);
    boxes.emplace(std::move(key), std::move(box));
  }
  void read_through_scratch(const std::string& key, at::Tensor destination) {
    const std::lock_guard<std::mutex> lock(mutex);
    destinations.insert_or_assign(key, std::move(destination));
  }
  /// The destination of a box read into a scratch tensor, taken out; undefined when there is none.
  at::Tensor destination_of(const std::string& key) {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto found = destinations.find(key);
    if (found == destinations.end()) return {};
    at::Tensor destination = std::move(found->second);
    destinations.erase(found);
    return destination;
  }
};

StashingLoadPlanner::StashingLoadPlanner(LoadPlanner& planner, int rank,
                                         const ReadOnceSchedule& schedule, const Metadata& metadata)
    : planner_(planner), stash_(std::make_unique<Stash>()) {
  const SavedDtypes dtypes = saved_dtypes(metadata);
  for (const ReadOnceTransfer& transfer : schedule.transfers) {
    if (transfer.from == rank) {
      for (const ReadItem& item : transfer.items) {
        std::optional<at::ScalarType> dtype;
        if (item.type == LoadItemType::kTensor) dtype = saved_dtype(dtypes, item);
        stash_->wanted.emplace(saved_box_key(item), dtype);
      }
    }
  }
}

StashingLoadPlanner::~StashingLoadPlanner() = default;

void StashingLoadPlanner::set_up(StateDict& state_dict, const Metadata& metadata,
                                 bool is_coordinator) {
  planner_.set_up(state_dict, metadata, is_coordinator);
}
LoadPlan StashingLoadPlanner::create_local_plan() { return planner_.create_local_plan(); }
std::vector<LoadPlan> StashingLoadPlanner::create_global_plan(std::vector<LoadPlan> plans) {
  return planner_.create_global_plan(std::move(plans));
}
LoadPlan StashingLoadPlanner::finish_plan(LoadPlan central_plan) {
  return planner_.finish_plan(std::move(central_plan));
}
at::Tensor StashingLoadPlanner::resolve_tensor(const ReadItem& item) {
  at::Tensor destination = planner_.resolve_tensor(item);
  const std::string key = saved_box_key(item);
  const std::optional<at::ScalarType>* dtype = stash_->find_wanted(key);
  if (dtype == nullptr || !dtype->has_value() || destination.scalar_type() == **dtype) {
    return destination;
  }
  // Kept as storage held it; this rank's destination gets it converted in commit_tensor.
  at::Tensor scratch = at::empty(item.lengths, at::TensorOptions().dtype(**dtype));
  stash_->read_through_scratch(key, std::move(destination));
  return scratch;
}

void StashingLoadPlanner::commit_tensor(const ReadItem& item, const at::Tensor& tensor) {
  std::string key = saved_box_key(item);
  if (stash_->find_wanted(key) == nullptr) {
    planner_.commit_tensor(item, tensor);
    return;
  }
  at::Tensor destination = stash_->destination_of(key);
  stash_->keep(std::move(key), tensor_bytes(tensor));
  if (!destination.defined()) {
    planner_.commit_tensor(item, tensor);
    return;
  }
  destination.copy_(tensor);
  planner_.commit_tensor(item, destination);
}

void StashingLoadPlanner::load_bytes(const ReadItem& item, c10::IValue value) {
  std::string key = saved_box_key(item);
  if (stash_->find_wanted(key) != nullptr) {
    MemorySink sink;
    write_bytes_item(sink, value);
    stash_->keep(std::move(key), std::move(sink.buffer()));
  }
  planner_.load_bytes(item, std::move(value));
}

IncompatibleKeys StashingLoadPlanner::report() const { return planner_.report(); }

const std::string* StashingLoadPlanner::find(const ReadItem& item) const {
  const std::lock_guard<std::mutex> lock(stash_->mutex);
  const auto found = stash_->boxes.find(saved_box_key(item));
  return found == stash_->boxes.end() ? nullptr : &found->second;
}

void exchange_read_once(Collectives& ranks, const ReadOnceSchedule& schedule,
                        const StashingLoadPlanner* stash, LoadPlanner& planner,
                        const Metadata& metadata) {
  std::exception_ptr failure;
  const SavedDtypes dtypes = saved_dtypes(metadata);
  for (const ReadOnceTransfer& transfer : schedule.transfers) {
    if (transfer.from == ranks.rank()) {
      send_transfer(ranks, transfer, stash, failure);
    } else {
      receive_transfer(ranks, transfer, dtypes, planner, failure);
    }
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
}

}  // namespace dcpp::detail
