// The collectives of the state-dict helpers.
//
// gather_sharded_leaves, protocol (three all-gathers, whatever the number of tensors):
//   1. [count, FNV-1a hash of the sharded keys, payload bytes]: the ranks must agree on the keys;
//   2. every shard's offsets and sizes (the same number of int64s on every rank);
//   3. every rank's shards' bytes, concatenated (16-byte aligned) and padded to the longest rank's
//      length (Gloo's all-gather needs equal sizes; shards may be uneven or empty).
// Each rank then copies each rank's pieces into the whole tensors.
//
// broadcast_state_dict: rank 0 pickles its state dict (torch::jit::pickle_save: tensors and
// plain values, tuples kept) and broadcasts the length, then the bytes, after a tag byte: 'E'
// instead, with its error, when it cannot (a key of its state dict is not whole), so every rank
// fails with rank 0's error rather than wait for bytes that never come.

#include "state_dict_collectives.h"

#include "tensor_piece.h"

#include "core/exception_message.h"
#include "core/group_calls.h"
#include "core/shape_string.h"
#include "state_dict/box.h"
#include "state_dict/state_value_ivalue.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/flatten.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>

namespace dcpp::detail {

int group_rank(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  return group ? group->getRank() : 0;
}

int group_size(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  return group ? group->getSize() : 1;
}

namespace {

constexpr int64_t kAlignment = 16;

int64_t aligned(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

uint64_t fnv1a(const std::vector<FlatEntry>& entries) {
  uint64_t hash = 1469598103934665603ULL;
  for (const FlatEntry& entry : entries) {
    for (const char c : entry.key + '\n') {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ULL;
    }
  }
  return hash;
}

// A whole tensor assembled from pieces; counts the elements the pieces bring.
struct Assembly {
  at::Tensor whole;
  int64_t covered = 0;
};

// The sharded tensors of `state_dict`, in order; each may hold one local shard at most.
std::vector<FlatEntry> sharded_leaves(StateDict& state_dict) {
  std::vector<FlatEntry> entries;
  for (FlatEntry& entry : flatten_state_dict(state_dict)) {
    if (!entry.value->is_sharded_tensor()) continue;
    const std::size_t shards = entry.value->sharded_tensor().local_shards().size();
    if (shards > 1) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "full_state_dict: sharded tensor '" + entry.key + "' holds " + std::to_string(shards) +
              " local shards; the state-dict helpers gather at most one per rank");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

// An uninitialized whole tensor for each sharded tensor, of its global shape.
std::vector<Assembly> empty_assemblies(const std::vector<FlatEntry>& entries) {
  std::vector<Assembly> assemblies(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const ShardedTensor& sharded = entries[i].value->sharded_tensor();
    assemblies[i].whole =
        at::empty(sharded.global_shape(), sharded.local_shards().empty()
                                              ? at::TensorOptions().dtype(sharded.dtype())
                                              : sharded.local_shards().front().tensor.options());
  }
  return assemblies;
}

// This rank's piece of `entry`: its shard, or an empty box at the origin.
Shard local_piece(const FlatEntry& entry) {
  const ShardedTensor& sharded = entry.value->sharded_tensor();
  if (!sharded.local_shards().empty()) return sharded.local_shards().front();
  const std::vector<int64_t> zeros(sharded.global_shape().size(), 0);
  return Shard{at::empty(zeros, at::TensorOptions().dtype(sharded.dtype())), zeros};
}

// Step 1: the ranks agree on the keys; returns the longest rank's payload (at least 1 byte).
int64_t agree_on_keys(GroupCalls& calls, const std::vector<FlatEntry>& entries, int64_t payload) {
  const at::Tensor header =
      at::tensor(std::vector<int64_t>{static_cast<int64_t>(entries.size()),
                                      static_cast<int64_t>(fnv1a(entries)), payload},
                 at::kLong);
  const std::vector<at::Tensor> headers = calls.all_gather(header, "the keys");
  int64_t longest = 1;
  for (int r = 0; r < calls.size(); ++r) {
    if (headers[r][0].item<int64_t>() != header[0].item<int64_t>() ||
        headers[r][1].item<int64_t>() != header[1].item<int64_t>()) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "full_state_dict: rank " + std::to_string(calls.rank()) + " holds " +
              std::to_string(entries.size()) + " sharded tensors, rank " + std::to_string(r) +
              " holds " + std::to_string(headers[r][0].item<int64_t>()) +
              " or others: every rank of the layout's process group must list the same sharded "
              "tensors in the same order");
    }
    longest = std::max(longest, headers[r][2].item<int64_t>());
  }
  return longest;
}

// Copies rank `r`'s pieces, described by its `boxes` (offsets, then sizes, per entry) and laid out
// in `bytes` as step 3 packs them, into the assemblies.
void place_pieces_of_rank(int r, const at::Tensor& boxes, const at::Tensor& bytes,
                          const std::vector<FlatEntry>& entries,
                          std::vector<Assembly>& assemblies) {
  const int64_t* box = boxes.data_ptr<int64_t>();
  uint8_t* byte = bytes.data_ptr<uint8_t>();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    Assembly& assembly = assemblies[i];
    const int64_t dims = assembly.whole.dim();
    const std::vector<int64_t> offsets(box, box + dims);
    const std::vector<int64_t> sizes(box + dims, box + 2 * dims);
    box += 2 * dims;
    if (!box_lies_inside(offsets, sizes, assembly.whole.sizes())) {
      throw CheckpointError(ErrorKind::kUsage, "full_state_dict: rank " + std::to_string(r) +
                                                   "'s shard of '" + entries[i].key +
                                                   "' (offsets " + shape_string(offsets) +
                                                   ", sizes " + shape_string(sizes) +
                                                   ") lies outside its global "
                                                   "shape " +
                                                   shape_string(assembly.whole.sizes()));
    }
    int64_t numel = 1;
    for (const int64_t size : sizes) numel *= size;
    if (numel > 0) {
      const at::Tensor piece =
          at::from_blob(byte, sizes, at::TensorOptions().dtype(assembly.whole.dtype()));
      box_of(assembly.whole, offsets, sizes).copy_(piece);
    }
    assembly.covered += numel;
    byte += aligned(numel * static_cast<int64_t>(assembly.whole.element_size()));
  }
}

// Every rank's pieces into the assemblies, in the three all-gathers of the protocol (at the top).
void gather_pieces(GroupCalls& calls, const std::vector<FlatEntry>& entries,
                   std::vector<Assembly>& assemblies) {
  std::vector<at::Tensor> pieces;
  std::vector<int64_t> boxes;
  int64_t payload = 0;
  for (const FlatEntry& entry : entries) {
    const Shard shard = local_piece(entry);
    pieces.push_back(shard.tensor.detach().to(at::kCPU).contiguous());
    boxes.insert(boxes.end(), shard.offsets.begin(), shard.offsets.end());
    for (const int64_t size : shard.tensor.sizes()) boxes.push_back(size);
    payload += aligned(pieces.back().numel() * static_cast<int64_t>(pieces.back().element_size()));
  }
  const int64_t longest = agree_on_keys(calls, entries, payload);
  const std::vector<at::Tensor> all_boxes = calls.all_gather(
      boxes.empty() ? at::zeros({1}, at::kLong) : at::tensor(boxes, at::kLong), "the shapes");
  at::Tensor bytes = at::zeros({longest}, at::kByte);
  int64_t at_byte = 0;
  for (const at::Tensor& piece : pieces) {
    const int64_t n = piece.numel() * static_cast<int64_t>(piece.element_size());
    if (n > 0) {
      std::memcpy(bytes.data_ptr<uint8_t>() + at_byte, piece.data_ptr(), static_cast<size_t>(n));
    }
    at_byte += aligned(n);
  }
  const std::vector<at::Tensor> all_bytes = calls.all_gather(bytes, "the shards");
  for (int r = 0; r < calls.size(); ++r) {
    place_pieces_of_rank(r, all_boxes[r], all_bytes[r], entries, assemblies);
  }
}

}  // namespace

void gather_sharded_leaves(StateDict& state_dict,
                           const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  const std::vector<FlatEntry> entries = sharded_leaves(state_dict);
  std::vector<Assembly> assemblies = empty_assemblies(entries);
  const int size = group_size(group);
  if (size == 1) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Shard shard = local_piece(entries[i]);
      box_of(assemblies[i].whole, shard.offsets, shard.tensor.sizes()).copy_(shard.tensor);
      assemblies[i].covered = shard.tensor.numel();
    }
  } else {
    GroupCalls calls(group, "state dict");
    gather_pieces(calls, entries, assemblies);
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (assemblies[i].covered < assemblies[i].whole.numel()) {
      throw CheckpointError(ErrorKind::kUsage,
                            "full_state_dict: the shards of '" + entries[i].key + "' on the " +
                                std::to_string(size) + " rank(s) of the process group hold " +
                                std::to_string(assemblies[i].covered) + " of its " +
                                std::to_string(assemblies[i].whole.numel()) +
                                " elements; the layout's pieces must cover every tensor (is the "
                                "layout's process_group() the group the tensor is sharded over?)");
    }
    *entries[i].value = StateValue(std::move(assemblies[i].whole));
  }
}

namespace {

// The first byte of what rank 0 broadcasts.
constexpr char kPickled = 'P';
constexpr char kFailed = 'E';

// The full state dict rank 0 holds, as the one IValue it broadcasts: tensors detached, on the CPU.
c10::IValue full_state_to_ivalue(const StateDict& state_dict) {
  try {
    return detail::whole_state_to_ivalue(StateValue(state_dict), "", [](const at::Tensor& tensor) {
      return tensor.detach().to(at::kCPU);
    });
  } catch (const CheckpointError& e) {
    throw CheckpointError(e.kind(), std::string("broadcast_from_rank0 on rank 0: ") +
                                        e.what_without_backtrace() +
                                        "; rank 0 must hold a full state dict (whole tensors "
                                        "and values)");
  }
}

}  // namespace

StateDict broadcast_state_dict(const StateDict& state_dict,
                               const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                               const std::exception_ptr& failure, int root) {
  if (group_size(group) == 1) {
    if (failure) std::rethrow_exception(failure);
    return state_dict;
  }
  // The root sends 'P' and the pickle, or 'E' and why it could not make one, which every rank
  // then throws: no rank is left waiting for bytes that never come.
  std::string message;
  if (group->getRank() == root && failure) {
    message = kFailed + exception_message(failure);
  } else if (group->getRank() == root) {
    try {
      const std::vector<char> bytes = torch::jit::pickle_save(full_state_to_ivalue(state_dict));
      message.reserve(bytes.size() + 1);
      message.push_back(kPickled);
      message.append(bytes.begin(), bytes.end());
    } catch (const std::exception&) {
      message = kFailed + exception_message(std::current_exception());
    }
  }
  message =
      GroupCalls(group, "broadcast_from_rank0").broadcast_bytes(message, root, "the state dict");
  if (message.empty() || message[0] != kPickled) {
    throw CheckpointError(ErrorKind::kUsage, message.empty()
                                                 ? "broadcast_from_rank0: rank " +
                                                       std::to_string(root) + " sent nothing"
                                                 : message.substr(1));
  }
  if (group->getRank() == root) {
    return state_dict;
  }
  const std::vector<char> bytes(message.begin() + 1, message.end());
  StateValue received(torch::jit::pickle_load(bytes));
  if (!received.is_dict()) {
    throw CheckpointError(ErrorKind::kUsage, "broadcast_from_rank0: rank " +
                                                 std::to_string(group->getRank()) + " received a " +
                                                 received.kind_name() + " from rank " +
                                                 std::to_string(root) + ", not a dict");
  }
  return std::move(received.dict());
}

std::vector<StateDict> all_gather_state_dicts(const StateDict& state_dict,
                                              const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  std::vector<StateDict> all;
  for (int root = 0; root < group_size(group); ++root) {
    all.push_back(broadcast_state_dict(state_dict, group, nullptr, root));
  }
  return all;
}

std::unordered_set<std::string> fqns_of_all_stages(
    const ModelLayout& layout, const std::vector<ParameterPlacement>& placements,
    const StateDictOptions& options) {
  const auto stages = layout.stage_group();
  if (!stages || !(options.full_state_dict || options.broadcast_from_rank0)) return {};
  std::string joined;
  for (const ParameterPlacement& placement : placements) joined += placement.fqn + '\n';
  GroupCalls calls(stages, "state dict");
  std::unordered_set<std::string> all;
  for (int root = 0; root < calls.size(); ++root) {
    const std::string received = calls.broadcast_bytes(joined, root, "the names of a stage");
    for (std::size_t start = 0, end; (end = received.find('\n', start)) != std::string::npos;
         start = end + 1) {
      all.insert(received.substr(start, end - start));
    }
  }
  return all;
}

bool is_first_of_layout(const ModelLayout& layout) {
  return group_rank(layout.shard_group()) == 0 && group_rank(layout.replicate_group()) == 0 &&
         group_rank(layout.stage_group()) == 0;
}

StateDict broadcast_from_first_of_layout(const StateDict& state_dict, const ModelLayout& layout) {
  // Step i runs along groups[i] on the ranks that are rank 0 of every later group: after it, every
  // such rank of the later groups holds the first's state dict. A failure is passed on by the
  // steps after it, so that every rank hears of it.
  const c10::intrusive_ptr<c10d::ProcessGroup> groups[] = {
      layout.stage_group(), layout.shard_group(), layout.replicate_group()};
  StateDict held = state_dict;
  std::exception_ptr failure;
  for (std::size_t i = 0; i < 3; ++i) {
    bool takes_part = true;
    for (std::size_t later = i + 1; later < 3; ++later) {
      takes_part = takes_part && group_rank(groups[later]) == 0;
    }
    if (!takes_part) continue;
    try {
      held = broadcast_state_dict(held, groups[i], failure);
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return held;
}

}  // namespace dcpp::detail
