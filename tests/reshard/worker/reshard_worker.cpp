// One rank of a resharding test, started by dcpp-launch with the torchrun variables set.
// A mode that must fail prints "failed as expected (<its ErrorKind>): <message>".
//
//   reshard_worker save DIR LAYOUT      saves the test state, sharded as LAYOUT over the ranks
//   reshard_worker save-local DIR LAYOUT  the same, without collectives: each rank saves alone
//                                       (`__<rank>.metadata`), its rank taken from the group
//   reshard_worker save-alone DIR RANK  only rank RANK saves (layout row, without collectives);
//                                       the others exit at once: a collective would fail the save
//   reshard_worker load DIR LAYOUT      loads it sharded as LAYOUT; exit 0 iff every element equals
//   reshard_worker fail DIR RANK        saves, but rank RANK fails while planning: every rank must
//                                       get a CheckpointError naming RANK, and nothing is committed
//   reshard_worker fail-write DIR RANK  the same, failing while writing (a value it cannot pickle)
//   reshard_worker fail-read DIR RANK   loads DIR (saved "row"), but rank RANK's storage fails
//                                       while reading: every rank must get a CheckpointError
//                                       naming RANK and the cause
//   reshard_worker corrupt-read DIR RANK[io0]  loads DIR (saved "row"; the test flipped a byte in
//                                       each of rank RANK's chunks): every rank must get a
//                                       CheckpointError naming RANK; with "io0" rank 0's storage
//                                       fails too
//   reshard_worker fail-apply DIR RANK  loads DIR (saved "row") into a Stateful whose
//                                       load_state_dict() throws on rank RANK only: every rank
//                                       must get a CheckpointError naming RANK (none may hang)
//   reshard_worker atomic-read DIR RANK an all-or-nothing load of DIR (saved "row") whose storage
//                                       fails on rank RANK while reading: every rank must get a
//                                       CheckpointError naming RANK, its tensors unchanged bit for
//                                       bit and its Stateful not loaded
//   reshard_worker die-save DIR RANK    saves, but rank RANK kills itself (SIGKILL) while writing;
//                                       the others ignore SIGTERM and must fail on their own within
//                                       the group's 3 s timeout, committing nothing
//   reshard_worker fixture DIR LAYOUT   loads a PyTorch fixture DIR (two_rank_sharded, or the
//                                       per-rank no_collectives_3) sharded as LAYOUT and compares
//                                       with the same checkpoint loaded whole
//   reshard_worker hf-save DIR LAYOUT   saves the tensors of the test state (no "step": safetensors
//                                       hold only tensors) as a Hugging Face directory, every rank
//                                       writing its chunks straight into files of <= 400 bytes
//   reshard_worker hf-load DIR LAYOUT   loads such a directory (dcpp's or Python's) sharded as
//                                       LAYOUT; exit 0 iff every element equals. LAYOUT:floats
//                                       leaves out the integer tensor "model.i"
//   reshard_worker plan-cache DIR LAYOUT  saves DIR/1 .. DIR/6 through a SavePlanCache: the same
//                                       structure twice, a tensor added on the last rank, rank 1's
//                                       cache lost, the coordinator's lost, the same again; checks
//                                       which saves reused the global plan and that tokens cost
//                                       less traffic than plans
//   reshard_worker read-once DIR LAYOUT  loads DIR (saved "row") as LAYOUT twice, every rank
//                                       reading all it needs, then reading once; both must equal.
//                                       Prints each rank's bytes read and received in both modes
//                                       ("rank R read N never, M once, received K never, L once")
//   reshard_worker read-once-dtypes DIR D0,D1,...  loads DIR (saved "row") replicated, reading
//                                       once, rank r's floating-point tensors in dtype Dr
//                                       (bfloat16, float16, float32 or float64; a planner that
//                                       converts): each must equal what storage gives converted to
//                                       its dtype, bit for bit, though it received part of them
//                                       from ranks of other dtypes
//   reshard_worker fail-commit DIR RANK loads DIR (saved "row") replicated, reading once, through
//                                       a planner whose last commit_tensor on rank RANK throws: a
//                                       box it received, after the reads. Every rank must get a
//                                       CheckpointError naming RANK and the step (none may hang)
//   reshard_worker whole DIR LAYOUT     loads any checkpoint DIR (DCP, saved without collectives,
//                                       Hugging Face) sharded as LAYOUT and compares every tensor
//                                       and value with the same checkpoint loaded whole
//
// Every load reads once when DCPP_TEST_READ_ONCE=always is set (LoadOptions::read_once).
//
// save, load, fixture, whole, hf-save, hf-load and read-once take lists: `load D1,D2 row,col` loads
// D1 as row then D2 as col; one DIR serves every layout of the list (`load D row,col`), one LAYOUT
// every DIR. All run in one process, so a test starts the ranks once for many checks (a process
// takes half a second of libtorch's start-up). The exit code is the first failed run's.
//
// LAYOUT: row (dim-0 near-equal parts), chunk (dim-0 parts as torch.chunk and DTensor's Shard(0)
// cut them: ceil(rows / ranks) each, the last ones shorter or empty), col (dim-1 parts), uneven
// (dim-0 parts of 1, 2, 3... rows weight), block (2-D: a grid of 2 x ranks/2 blocks when the rank
// count is even), replicated (every rank holds everything). The global tensors are the same on
// every rank (fixed formulas), so each rank knows what every element must be.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>
#include <dcpp/dist/launched_rank.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/extend.h>
#include "comma_list.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

namespace {

struct Rank {
  int index;
  int count;
};

// Set by the hf-* modes: "e" without sin(), whose last bit may differ between libm builds, so
// Python can check dcpp's files (and dcpp Python's) bit for bit.
bool exact_values = false;

at::Tensor global_tensor(const std::string& name) {
  if (name == "w") return at::arange(13 * 7, at::kFloat).reshape({13, 7}).div(7);
  if (name == "e" && exact_values) return at::arange(9 * 10, at::kDouble).reshape({9, 10}).div(3);
  if (name == "e") return at::arange(9 * 10, at::kDouble).reshape({9, 10}).sin();
  if (name == "i") return at::arange(11, at::kLong).mul(3);
  return at::arange(6, at::kBFloat16).reshape({2, 3});  // "b": 2 rows, fewer than some worlds
}

// Rows [begin, end) of `length` for part `part` of `parts`, weights 1, 2, 3, ... when uneven.
std::pair<int64_t, int64_t> split(int64_t length, int part, int parts, bool uneven) {
  if (!uneven) {
    const int64_t base = length / parts, longer = length % parts;
    const int64_t begin = part * base + std::min<int64_t>(part, longer);
    return {begin, begin + base + (part < longer ? 1 : 0)};
  }
  const int64_t total = parts * (parts + 1) / 2;
  int64_t before = part * (part + 1) / 2;
  return {length * before / total, length * (before + part + 1) / total};
}

// This rank's part of `full` in `layout` (for "replicated", a plain tensor: every rank holds it).
dcpp::StateValue shard(const at::Tensor& full, const std::string& layout, Rank rank) {
  if (layout == "replicated") {
    return full;
  }
  if (layout == "block" && full.dim() == 2 && rank.count % 2 == 0) {
    const int columns = rank.count / 2;
    auto [row_begin, row_end] = split(full.size(0), rank.index / columns, 2, false);
    auto [col_begin, col_end] = split(full.size(1), rank.index % columns, columns, false);
    std::vector<dcpp::Shard> shards;
    if (row_end > row_begin && col_end > col_begin) {
      shards.push_back({full.narrow(0, row_begin, row_end - row_begin)
                            .narrow(1, col_begin, col_end - col_begin)
                            .clone(),
                        {row_begin, col_begin}});
    }
    return dcpp::ShardedTensor(full.sizes().vec(), std::move(shards), full.scalar_type());
  }
  const int64_t dim = (layout == "col" && full.dim() > 1) ? 1 : 0;
  auto [begin, end] = split(full.size(dim), rank.index, rank.count, layout == "uneven");
  if (layout == "chunk") {
    const int64_t size = (full.size(0) + rank.count - 1) / rank.count;
    begin = std::min<int64_t>(rank.index * size, full.size(0));
    end = std::min<int64_t>(begin + size, full.size(0));
  }
  std::vector<int64_t> offsets(full.dim(), 0);
  offsets[dim] = begin;
  std::vector<dcpp::Shard> shards;
  if (end > begin) {
    shards.push_back({full.narrow(dim, begin, end - begin).clone(), offsets});
  }
  return dcpp::ShardedTensor(full.sizes().vec(), std::move(shards), full.scalar_type());
}

dcpp::StateDict state(const std::string& layout, Rank rank, bool zeros) {
  dcpp::StateDict model;
  for (const char* name : {"w", "e", "i", "b"}) {
    at::Tensor full = global_tensor(name);
    model.insert(name, shard(zeros ? at::zeros_like(full) : full, layout, rank));
  }
  dcpp::StateDict sd;
  sd.insert("model", model);
  sd.insert("replicated", zeros ? at::zeros({5}) : at::linspace(0, 1, 5));  // on every rank
  sd.insert("step", zeros ? 0 : 11);
  return sd;
}

// The tensors of `state` alone, as a Hugging Face directory holds them.
dcpp::StateDict tensors_only(dcpp::StateDict sd) {
  sd.erase("step");
  return sd;
}

// `whole`'s tree with zeros sharded as `layout` for every tensor of one or more dimensions, a
// whole zero tensor for a 0-d one, and None for every value.
dcpp::StateValue sharded_zeros(const dcpp::StateValue& whole, const std::string& layout,
                               Rank rank) {
  if (whole.is_tensor()) {
    const at::Tensor zeros = at::zeros_like(whole.tensor());
    return zeros.dim() > 0 ? shard(zeros, layout, rank) : dcpp::StateValue(zeros);
  }
  if (whole.is_dict()) {
    dcpp::StateDict dict;
    for (const auto& item : whole.dict()) {
      dict.insert(item.key, sharded_zeros(item.value, layout, rank));
    }
    return dict;
  }
  if (whole.is_list()) {
    dcpp::StateList list;
    for (const dcpp::StateValue& element : whole.list()) {
      list.push_back(sharded_zeros(element, layout, rank));
    }
    return list;
  }
  return dcpp::StateValue();
}

dcpp::StateDict sharded_zeros(const dcpp::StateDict& whole, const std::string& layout, Rank rank) {
  return sharded_zeros(dcpp::StateValue(whole), layout, rank).dict();
}

// Every tensor of `target` equals the same part of `whole`, every value equals, at any depth.
bool equal_to_whole(const dcpp::StateValue& target, const dcpp::StateValue& whole) {
  if (target.is_value()) {
    return whole.is_value() && target.value() == whole.value();
  }
  if (target.is_tensor()) {
    return whole.is_tensor() && target.tensor().equal(whole.tensor());
  }
  if (target.is_dict()) {
    bool ok = whole.is_dict() && whole.dict().size() == target.dict().size();
    for (const auto& item : target.dict()) {
      ok = ok && whole.dict().contains(item.key) &&
           equal_to_whole(item.value, whole.dict().at(item.key));
    }
    return ok;
  }
  if (target.is_list()) {
    bool ok = whole.is_list() && whole.list().size() == target.list().size();
    for (std::size_t i = 0; ok && i < target.list().size(); ++i) {
      ok = equal_to_whole(target.list()[i], whole.list()[i]);
    }
    return ok;
  }
  const at::Tensor full = whole.tensor();
  bool ok = true;
  for (const dcpp::Shard& piece : target.sharded_tensor().local_shards()) {
    at::Tensor expected = full;
    for (std::size_t d = 0; d < piece.offsets.size(); ++d) {
      expected = expected.narrow(static_cast<int64_t>(d), piece.offsets[d], piece.tensor.size(d));
    }
    ok = ok && piece.tensor.equal(expected);
  }
  return ok;
}

bool equal_to_whole(const dcpp::StateDict& target, const dcpp::StateDict& whole) {
  return equal_to_whole(dcpp::StateValue(target), dcpp::StateValue(whole));
}

bool check(const dcpp::StateDict& loaded, Rank rank) {
  bool ok = (!loaded.contains("step") || loaded.at("step").value().toInt() == 11) &&
            loaded.at("replicated").tensor().equal(at::linspace(0, 1, 5));
  for (const auto& item : loaded.at("model").dict()) {
    const at::Tensor full = global_tensor(item.key);
    if (item.value.is_tensor()) {
      ok = ok && item.value.tensor().equal(full);
      continue;
    }
    for (const dcpp::Shard& shard : item.value.sharded_tensor().local_shards()) {
      at::Tensor expected = full;
      for (std::size_t d = 0; d < shard.offsets.size(); ++d) {
        expected = expected.narrow(static_cast<int64_t>(d), shard.offsets[d], shard.tensor.size(d));
      }
      if (!shard.tensor.equal(expected)) {
        std::fprintf(stderr, "rank %d: '%s' differs at offsets %lld\n", rank.index,
                     item.key.c_str(), static_cast<long long>(shard.offsets[0]));
        ok = false;
      }
    }
  }
  return ok;
}

// The file system reader, but read_data fails on one rank, as a failing disk would.
class FailingReader final : public dcpp::FileSystemReader {
 public:
  FailingReader(const std::string& dir, bool fail) : FileSystemReader(dir), fail_(fail) {}
  void read_data(const dcpp::LoadPlan& plan, dcpp::LoadPlanner& planner) override {
    if (fail_) {
      throw dcpp::CheckpointError(dcpp::ErrorKind::kIo, "input/output error reading shard files");
    }
    FileSystemReader::read_data(plan, planner);
  }

 private:
  bool fail_;
};

// The load options of every load here: over `group`, reading once when DCPP_TEST_READ_ONCE says.
dcpp::LoadOptions load_options(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  dcpp::LoadOptions options;
  options.ranks.process_group = group;
  const char* read_once = std::getenv("DCPP_TEST_READ_ONCE");
  if (read_once != nullptr && std::string(read_once) == "always") {
    options.read_once = dcpp::ReadOnce::kAlways;
  }
  return options;
}

// A default planner whose last commit_tensor throws on one rank: reading once, the last box a
// rank places is one it received, so this fails the exchange after the reads, not the reads.
class FailingCommitPlanner final : public dcpp::DefaultLoadPlanner {
 public:
  explicit FailingCommitPlanner(bool fail) : fail_(fail) {}
  dcpp::LoadPlan create_local_plan() override {
    dcpp::LoadPlan plan = DefaultLoadPlanner::create_local_plan();
    for (const dcpp::ReadItem& item : plan.items) {
      tensor_items_ += item.type == dcpp::LoadItemType::kTensor;
    }
    return plan;
  }
  void commit_tensor(const dcpp::ReadItem& item, const at::Tensor& tensor) override {
    if (fail_ && ++committed_ == tensor_items_) {
      throw std::runtime_error("no room for " + item.dest_index.fqn);
    }
    DefaultLoadPlanner::commit_tensor(item, tensor);
  }

 private:
  bool fail_;
  int tensor_items_ = 0;
  std::atomic<int> committed_{0};
};

// read-once DIR LAYOUT: the same load without and with reading once, every element checked.
int read_once_loads(const std::string& dir, const std::string& layout,
                    const c10::intrusive_ptr<c10d::ProcessGroup>& group, const Rank& rank) {
  uint64_t read[2] = {0, 0};
  int64_t received[2] = {0, 0};
  bool ok = true;
  for (const dcpp::ReadOnce mode : {dcpp::ReadOnce::kNever, dcpp::ReadOnce::kAlways}) {
    dcpp::LoadOptions options = load_options(group);
    options.read_once = mode;
    dcpp::StateDict target = state(layout, rank, true);
    // A thread per data file: the copies for other ranks are taken on several threads at once.
    dcpp::FileSystemReader reader(dir, dcpp::FileSystemReaderOptions().with_thread_count(3));
    const dcpp::CheckpointTraffic before = dcpp::checkpoint_traffic();
    dcpp::load(target, reader, options);
    received[mode == dcpp::ReadOnce::kAlways] =
        dcpp::checkpoint_traffic().bytes_received - before.bytes_received;
    read[mode == dcpp::ReadOnce::kAlways] = reader.bytes_read();
    ok = check(target, rank) && ok;
  }
  std::printf("rank %d read %llu never, %llu once, received %lld never, %lld once (%s): %s\n",
              rank.index, static_cast<unsigned long long>(read[0]),
              static_cast<unsigned long long>(read[1]), static_cast<long long>(received[0]),
              static_cast<long long>(received[1]), layout.c_str(),
              ok ? "every element equal" : "DIFFERENT");
  return ok ? 0 : 1;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// Whether `returned` (what save returned on `rank`) is the committed Metadata (`whole`), or only
// what this rank wrote of it: its own data files' storage entries, each as committed, and keys and
// chunks the committed Metadata has.
bool returned_as_expected(const dcpp::Metadata& returned, const dcpp::Metadata& committed,
                          const Rank& rank, bool whole) {
  const auto storage_in = [](const dcpp::Metadata& metadata,
                             const dcpp::MetadataIndex& index) -> const dcpp::StorageInfo* {
    for (const auto& [at, info] : metadata.storage_data) {
      if (at == index) return &info;
    }
    return nullptr;
  };
  const auto chunks_in = [](const dcpp::Metadata& metadata, const std::string& key) {
    for (const auto& [name, entry] : metadata.state_dict_metadata) {
      if (name == key) return std::get_if<dcpp::TensorStorageMetadata>(&entry);
    }
    return static_cast<const dcpp::TensorStorageMetadata*>(nullptr);
  };
  bool ok = whole ? returned.storage_data.size() == committed.storage_data.size() &&
                        returned.state_dict_metadata.size() == committed.state_dict_metadata.size()
                  : returned.storage_data.size() < committed.storage_data.size();
  const std::string own_files = "__" + std::to_string(rank.index) + "_";
  for (const auto& [index, info] : returned.storage_data) {
    const dcpp::StorageInfo* found = storage_in(committed, index);
    ok = ok && found != nullptr && found->relative_path == info.relative_path &&
         found->offset == info.offset && found->length == info.length &&
         (whole || info.relative_path.rfind(own_files, 0) == 0);
  }
  for (const auto& [key, entry] : returned.state_dict_metadata) {
    const auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&entry);
    const dcpp::TensorStorageMetadata* saved = chunks_in(committed, key);
    if (tensor == nullptr) continue;
    ok = ok && saved != nullptr && saved->size == tensor->size &&
         saved->properties.dtype == tensor->properties.dtype;
    for (const dcpp::ChunkStorageMetadata& chunk : tensor->chunks) {
      ok = ok && saved != nullptr &&
           std::find(saved->chunks.begin(), saved->chunks.end(), chunk) != saved->chunks.end();
    }
  }
  if (!ok) {
    std::fprintf(stderr,
                 "rank %d: save returned %zu storage entries and %zu keys, not %s of the "
                 "committed %zu and %zu\n",
                 rank.index, returned.storage_data.size(), returned.state_dict_metadata.size(),
                 whole ? "all" : "this rank's part", committed.storage_data.size(),
                 committed.state_dict_metadata.size());
  }
  return ok;
}

// Loads into tensors of other dtypes than the saved ones, as a program loading a float32
// checkpoint into a bfloat16 model does (DefaultLoadPlanner refuses another dtype): it plans as
// the default planner over zeros of the saved dtypes, and hands the storage reader views of the
// state dict's own tensors, into which reading converts. Keys are "a.b" paths of nested dicts.
class ConvertingLoadPlanner final : public dcpp::DefaultLoadPlanner {
 public:
  void set_up(dcpp::StateDict& state_dict, const dcpp::Metadata& metadata,
              bool is_coordinator) override {
    targets_ = &state_dict;
    saved_dtypes_ = in_saved_dtypes(state_dict, metadata, "");
    DefaultLoadPlanner::set_up(saved_dtypes_, metadata, is_coordinator);
  }
  at::Tensor resolve_tensor(const dcpp::ReadItem& item) override {
    at::Tensor view = find(item.dest_index.fqn).tensor();
    for (std::size_t d = 0; d < item.lengths.size(); ++d) {
      view = view.narrow(static_cast<int64_t>(d), item.dest_offsets[d], item.lengths[d]);
    }
    return view;
  }
  void commit_tensor(const dcpp::ReadItem&, const at::Tensor&) override {}
  void load_bytes(const dcpp::ReadItem& item, c10::IValue value) override {
    find(item.dest_index.fqn) = dcpp::StateValue(std::move(value));
  }

 private:
  static dcpp::StateDict in_saved_dtypes(const dcpp::StateDict& dict,
                                         const dcpp::Metadata& metadata,
                                         const std::string& prefix) {
    dcpp::StateDict saved;
    for (const auto& item : dict) {
      const std::string key = prefix + item.key;
      if (item.value.is_dict()) {
        saved.insert(item.key, in_saved_dtypes(item.value.dict(), metadata, key + "."));
        continue;
      }
      dcpp::StateValue value = item.value;
      for (const auto& [name, entry] : metadata.state_dict_metadata) {
        const auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&entry);
        if (name == key && tensor != nullptr && item.value.is_tensor()) {
          value = at::zeros_like(item.value.tensor(),
                                 at::TensorOptions().dtype(tensor->properties.dtype));
        }
      }
      saved.insert(item.key, value);
    }
    return saved;
  }
  dcpp::StateValue& find(const std::string& fqn) {
    dcpp::StateDict* dict = targets_;
    std::size_t start = 0;
    for (std::size_t dot; (dot = fqn.find('.', start)) != std::string::npos; start = dot + 1) {
      dict = &dict->at(fqn.substr(start, dot - start)).dict();
    }
    return dict->at(fqn.substr(start));
  }

  dcpp::StateDict* targets_ = nullptr;
  dcpp::StateDict saved_dtypes_;
};

// read-once-dtypes DIR D0,D1,...: see the top of the file.
int read_once_dtypes(const std::string& dir, const std::string& dtype_names,
                     const c10::intrusive_ptr<c10d::ProcessGroup>& group, const Rank& rank) {
  const std::vector<std::string> names = dcpp::test::split_at_commas(dtype_names);
  const std::string& name = names.at(static_cast<std::size_t>(rank.index) % names.size());
  const at::ScalarType dtype = name == "bfloat16"  ? at::kBFloat16
                               : name == "float16" ? at::kHalf
                               : name == "float64" ? at::kDouble
                                                   : at::kFloat;
  // What storage gives a destination of this rank's dtype: the saved values, converted.
  const auto in_rank_dtype = [dtype](const at::Tensor& saved) {
    return saved.is_floating_point() ? saved.to(dtype) : saved.clone();
  };
  dcpp::StateDict model;
  for (const char* key : {"w", "e", "i", "b"}) {
    model.insert(key, at::zeros_like(in_rank_dtype(global_tensor(key))));
  }
  dcpp::StateDict target;
  target.insert("model", model);
  target.insert("replicated", at::zeros({5}, at::TensorOptions().dtype(dtype)));
  target.insert("step", 0);
  dcpp::LoadOptions options = load_options(group);
  options.read_once = dcpp::ReadOnce::kAlways;
  options.planner = std::make_shared<ConvertingLoadPlanner>();
  const dcpp::CheckpointTraffic before = dcpp::checkpoint_traffic();
  dcpp::load(target, dir, options);
  const int64_t received = dcpp::checkpoint_traffic().bytes_received - before.bytes_received;
  bool ok = target.at("step").value().toInt() == 11 &&
            same_bits(target.at("replicated").tensor(), in_rank_dtype(at::linspace(0, 1, 5)));
  for (const auto& item : target.at("model").dict()) {
    if (!same_bits(item.value.tensor(), in_rank_dtype(global_tensor(item.key)))) {
      std::fprintf(stderr, "rank %d (%s): 'model.%s' differs from the saved values in %s\n",
                   rank.index, name.c_str(), item.key.c_str(), name.c_str());
      ok = false;
    }
  }
  std::printf("rank %d (%s) received %lld bytes: %s\n", rank.index, name.c_str(),
              static_cast<long long>(received),
              ok ? "every element as storage gives it" : "DIFFERENT");
  return ok ? 0 : 1;
}

// The model part of the test state behind the Stateful protocol; load_state_dict() throws when
// told to, as a user's object rejecting its state would.
class ModelHolder final : public dcpp::Stateful {
 public:
  ModelHolder(dcpp::StateDict model, bool reject) : model_(std::move(model)), reject_(reject) {}
  dcpp::StateDict state_dict() override { return model_; }
  void load_state_dict(const dcpp::StateDict&) override {
    if (reject_) {
      throw std::runtime_error("the model rejected its state");
    }
    ++loads;
  }
  int loads = 0;

 private:
  dcpp::StateDict model_;
  bool reject_;
};

// The file system writer, but one rank dies outright (SIGKILL: no destructor, no message) as
// soon as it starts writing.
class DyingWriter final : public dcpp::FileSystemWriter {
 public:
  DyingWriter(const std::string& dir, bool die)
      : FileSystemWriter(dir, dcpp::FileSystemWriterOptions().with_sync_files(false)), die_(die) {}
  std::vector<dcpp::WriteResult> write_data(const dcpp::SavePlan& plan,
                                            dcpp::SavePlanner& planner) override {
    if (die_) {
      std::raise(SIGKILL);
    }
    return FileSystemWriter::write_data(plan, planner);
  }

 private:
  bool die_;
};

// The checkpoint traffic of one save.
struct SaveTraffic {
  int64_t sent = 0;
  int64_t received = 0;
};

SaveTraffic save_counting(const dcpp::StateDict& sd, const std::filesystem::path& dir,
                          const dcpp::SaveOptions& options) {
  const dcpp::CheckpointTraffic before = dcpp::checkpoint_traffic();
  dcpp::save(sd, dir, options);
  const dcpp::CheckpointTraffic after = dcpp::checkpoint_traffic();
  return {after.bytes_sent - before.bytes_sent, after.bytes_received - before.bytes_received};
}

// plan-cache DIR LAYOUT: saves DIR/1 to DIR/5 through SavePlanCaches, checking on every rank
// which saves reused the global plan; each must load back (the test loads them).
int plan_cache_saves(const std::filesystem::path& dir, const std::string& layout,
                     const c10::intrusive_ptr<c10d::ProcessGroup>& group, const Rank& rank) {
  auto cache = std::make_shared<dcpp::SavePlanCache>();
  dcpp::SaveOptions options;
  options.ranks.process_group = group;
  options.file_system.sync_files = false;
  options.plan_cache = cache;
  bool ok = true;
  const auto expect = [&](const char* save, int64_t reused, int64_t full) {
    if (cache->reused_plans() != reused || cache->full_plans() != full) {
      std::printf("rank %d after %s: %lld reused, %lld full; expected %lld and %lld\n", rank.index,
                  save, static_cast<long long>(cache->reused_plans()),
                  static_cast<long long>(cache->full_plans()), static_cast<long long>(reused),
                  static_cast<long long>(full));
      ok = false;
    }
  };
  // 1: planned in full. 2: the same structure: tokens travel instead of plans, both ways.
  const SaveTraffic first = save_counting(state(layout, rank, false), dir / "1", options);
  expect("save 1", 0, 1);
  const SaveTraffic second = save_counting(state(layout, rank, false), dir / "2", options);
  expect("save 2", 1, 1);
  std::printf("rank %d sent %lld then %lld bytes, received %lld then %lld\n", rank.index,
              static_cast<long long>(first.sent), static_cast<long long>(second.sent),
              static_cast<long long>(first.received), static_cast<long long>(second.received));
  ok = ok && second.received < first.received && second.sent < first.sent;
  // 3: the last rank holds one more tensor: every rank plans in full (the others had sent
  // tokens: one more round).
  dcpp::StateDict more = state(layout, rank, false);
  if (rank.index == rank.count - 1) {
    more.insert("extra", at::arange(5, at::kFloat));
  }
  save_counting(more, dir / "3", options);
  expect("save 3 (a tensor added on one rank)", 1, 2);
  // 4: rank 1 lost its cache (a restarted process): it sends its plan, the others tokens.
  if (rank.index == 1) {
    cache = std::make_shared<dcpp::SavePlanCache>();
    options.plan_cache = cache;
  }
  save_counting(more, dir / "4", options);
  // Expected {reused, full} on ranks 0, 1 and 2 after saves 4, 5 and 6.
  constexpr int64_t kAfter[3][3][2] = {
      {{1, 3}, {0, 1}, {1, 3}}, {{0, 1}, {0, 2}, {1, 4}}, {{1, 1}, {1, 2}, {2, 4}}};
  const auto expect_on_this_rank = [&](const char* save, int n) {
    const auto& counts = kAfter[n][std::min(rank.index, 2)];
    expect(save, counts[0], counts[1]);
  };
  expect_on_this_rank("save 4 (rank 1's cache new)", 0);
  // 5: the coordinator lost its cache: the others' tokens name nothing it holds.
  if (rank.index == 0) {
    cache = std::make_shared<dcpp::SavePlanCache>();
    options.plan_cache = cache;
  }
  save_counting(more, dir / "5", options);
  expect_on_this_rank("save 5 (the coordinator's cache new)", 1);
  // 6: the same structure again: reused everywhere.
  save_counting(more, dir / "6", options);
  expect_on_this_rank("save 6", 2);
  std::printf("rank %d plan cache: %s\n", rank.index, ok ? "as expected" : "NOT AS EXPECTED");
  return ok ? 0 : 1;
}

// One run of `mode` on DIR with ARG (a layout or a rank); the process's exit code for it.
int run(const std::string& mode, const std::string& dir, const std::string& arg,
        const c10::intrusive_ptr<c10d::ProcessGroup>& group, const Rank& rank) {
  try {
    if (mode.rfind("hf-", 0) == 0) {
      exact_values = true;
    }
    if (mode == "hf-save") {
      dcpp::SaveOptions options;
      options.ranks.process_group = group;
      auto writer = dcpp::make_huggingface_writer(
          dir, dcpp::HuggingFaceWriterOptions().with_max_file_size(400).with_sync_files(false));
      dcpp::save(tensors_only(state(arg, rank, false)), *writer, options);
      return 0;
    }
    if (mode == "hf-load") {
      dcpp::LoadOptions options = load_options(group);
      const std::size_t colon = arg.find(':');
      dcpp::StateDict target = tensors_only(state(arg.substr(0, colon), rank, true));
      if (colon != std::string::npos && arg.substr(colon) == ":floats") {
        target.at("model").dict().erase("i");
      }
      dcpp::load(target, dir, options);  // the path overload finds the Hugging Face directory
      const bool ok = check(target, rank);
      if (rank.index == 0) {
        std::printf("loaded as %s on %d ranks: %s\n", arg.c_str(), rank.count,
                    ok ? "every element equal" : "DIFFERENT");
      }
      return ok ? 0 : 1;
    }
    if (mode == "whole") {
      const dcpp::StateDict whole = dcpp::load_from_keys(dir);
      dcpp::StateDict target = sharded_zeros(whole, arg, rank);
      dcpp::LoadOptions options = load_options(group);
      dcpp::load(target, dir, options);
      const bool ok = equal_to_whole(target, whole);
      std::printf("%zu entries loaded as %s on %d ranks: %s\n", whole.size(), arg.c_str(),
                  rank.count, ok ? "equal" : "DIFFERENT");
      return ok ? 0 : 1;
    }
    if (mode == "save-alone") {
      if (rank.index != std::stoi(arg)) {
        return 0;
      }
      dcpp::SaveOptions options;
      options.ranks.process_group = group;
      options.use_collectives = false;
      options.file_system.sync_files = false;
      dcpp::save(state("row", rank, false), dir, options);
      std::printf("rank %d saved alone\n", rank.index);
      return 0;
    }
    if (mode == "save" || mode == "save-local") {
      dcpp::SaveOptions options;
      options.ranks.process_group = group;
      options.use_collectives = mode == "save";
      options.file_system.sync_files = false;
      dcpp::save(state(arg, rank, false), dir, options);
      return 0;
    }
    if (mode == "traffic") {
      // Saved twice: as save returns the Metadata by default (the coordinator the whole, every
      // other rank its own part), then with metadata_on_every_rank (every rank the whole, as DCP).
      bool ok = true;
      for (const bool everywhere : {false, true}) {
        dcpp::SaveOptions options;
        options.ranks.process_group = group;
        options.file_system.sync_files = false;
        options.metadata_on_every_rank = everywhere;
        const std::string where = dir + (everywhere ? "-everywhere" : "");
        const dcpp::CheckpointTraffic before = dcpp::checkpoint_traffic();
        const dcpp::Metadata returned = dcpp::save(state(arg, rank, false), where, options);
        const dcpp::CheckpointTraffic after = dcpp::checkpoint_traffic();
        ok = returned_as_expected(returned, dcpp::read_metadata(where), rank,
                                  everywhere || rank.index == 0) &&
             ok;
        std::printf("rank %d%s received %lld bytes, sent %lld bytes\n", rank.index,
                    everywhere ? " (metadata everywhere)" : "",
                    static_cast<long long>(after.bytes_received - before.bytes_received),
                    static_cast<long long>(after.bytes_sent - before.bytes_sent));
      }
      if (ok) std::printf("rank %d: returned Metadata as expected\n", rank.index);
      return ok ? 0 : 1;
    }
    if (mode == "plan-cache") {
      return plan_cache_saves(dir, arg, group, rank);
    }
    if (mode == "read-once") {
      return read_once_loads(dir, arg, group, rank);
    }
    if (mode == "read-once-dtypes") {
      return read_once_dtypes(dir, arg, group, rank);
    }
    if (mode == "fail-commit") {
      dcpp::LoadOptions options = load_options(group);
      options.read_once = dcpp::ReadOnce::kAlways;
      options.planner = std::make_shared<FailingCommitPlanner>(rank.index == std::stoi(arg));
      dcpp::StateDict target = state("replicated", rank, true);
      try {
        dcpp::load(target, dir, options);
      } catch (const dcpp::CheckpointError& error) {
        const std::string message = error.what_without_backtrace();
        std::printf("failed as expected (%s): %s\n", dcpp::to_string(error.kind()),
                    message.c_str());
        return message.find("while exchanging what was read once (rank " + arg + ": no room for") !=
                       std::string::npos
                   ? 0
                   : 1;
      }
      std::fprintf(stderr, "rank %d: load succeeded although rank %s failed\n", rank.index,
                   arg.c_str());
      return 1;
    }
    if (mode == "load") {
      dcpp::LoadOptions options = load_options(group);
      dcpp::StateDict target = state(arg, rank, true);
      dcpp::load(target, dir, options);
      return check(target, rank) ? 0 : 1;
    }
    if (mode == "fixture") {
      // The reference: every tensor whole, by the single-process path the fixture tests check.
      const dcpp::StateDict whole = dcpp::load_from_keys(dir);
      dcpp::StateDict target;
      for (const auto& item : whole) {
        if (item.value.is_tensor()) {
          target.insert(item.key, shard(at::zeros_like(item.value.tensor()), arg, rank));
        } else {
          target.insert(item.key, 0);
        }
      }
      dcpp::LoadOptions options = load_options(group);
      dcpp::load(target, dir, options);
      bool ok = target.at("step").value().toInt() == whole.at("step").value().toInt();
      for (const auto& item : target) {
        if (item.value.is_value()) {
          continue;
        }
        const at::Tensor full = whole.at(item.key).tensor();
        if (item.value.is_tensor()) {
          ok = ok && item.value.tensor().equal(full);
          continue;
        }
        for (const dcpp::Shard& piece : item.value.sharded_tensor().local_shards()) {
          at::Tensor expected = full;
          for (std::size_t d = 0; d < piece.offsets.size(); ++d) {
            expected =
                expected.narrow(static_cast<int64_t>(d), piece.offsets[d], piece.tensor.size(d));
          }
          ok = ok && piece.tensor.equal(expected);
        }
      }
      std::printf("fixture loaded as %s on %d ranks: %s\n", arg.c_str(), rank.count,
                  ok ? "equal" : "DIFFERENT");
      return ok ? 0 : 1;
    }
    if (mode == "fail-read" || mode == "corrupt-read") {
      // fail-read: rank RANK's storage fails (kIo). corrupt-read: the test flipped a byte in each
      // of rank RANK's own chunks, so RANK alone reads corrupt bytes; with "io0" rank 0's storage
      // fails too (two kinds).
      const int failing = std::stoi(arg);
      const bool storage_fails = mode == "fail-read"
                                     ? rank.index == failing
                                     : arg.find("io0") != std::string::npos && rank.index == 0;
      const std::string cause = mode == "fail-read" ? "input/output error" : "";
      dcpp::LoadOptions options = load_options(group);
      dcpp::StateDict target = state("row", rank, true);
      FailingReader reader(dir, storage_fails);
      try {
        dcpp::load(target, reader, options);
      } catch (const dcpp::CheckpointError& error) {
        const std::string message = error.what_without_backtrace();
        std::printf("failed as expected (%s): %s\n", dcpp::to_string(error.kind()),
                    message.c_str());
        return message.find("rank " + std::to_string(failing) + ": ") != std::string::npos &&
                       message.find(cause) != std::string::npos
                   ? 0
                   : 1;
      }
      std::fprintf(stderr, "rank %d: load succeeded although rank %d failed\n", rank.index,
                   failing);
      return 1;
    }
    if (mode == "fail-apply" || mode == "atomic-read") {
      const bool this_rank = rank.index == std::stoi(arg);
      dcpp::LoadOptions options = load_options(group);
      options.all_or_nothing = mode == "atomic-read";
      dcpp::StateDict target = state("row", rank, false);  // the saved values: a load changes them
      for (auto& item : target.at("model").dict()) {       // sentinels, then compared bit for bit
        for (const dcpp::Shard& piece : item.value.sharded_tensor().local_shards()) {
          piece.tensor.fill_(7);
        }
      }
      std::vector<at::Tensor> sentinels;
      for (const auto& item : target.at("model").dict()) {
        for (const dcpp::Shard& piece : item.value.sharded_tensor().local_shards()) {
          sentinels.push_back(piece.tensor.clone());
        }
      }
      auto holder = std::make_shared<ModelHolder>(target.at("model").dict(),
                                                  mode == "fail-apply" && this_rank);
      target["model"] = dcpp::StateValue(std::static_pointer_cast<dcpp::Stateful>(holder));
      FailingReader reader(dir, mode == "atomic-read" && this_rank);
      try {
        dcpp::load(target, reader, options);
      } catch (const dcpp::CheckpointError& error) {
        const std::string message = error.what_without_backtrace();
        std::printf("failed as expected (%s): %s\n", dcpp::to_string(error.kind()),
                    message.c_str());
        const std::string cause =
            mode == "fail-apply" ? "the model rejected its state" : "input/output error";
        bool ok = message.find("rank " + arg + ": ") != std::string::npos &&
                  message.find(cause) != std::string::npos;
        if (mode == "atomic-read") {
          std::size_t next = 0;
          for (const auto& item : holder->state_dict()) {
            for (const dcpp::Shard& piece : item.value.sharded_tensor().local_shards()) {
              ok = ok && same_bits(piece.tensor, sentinels[next++]);
            }
          }
          ok = ok && holder->loads == 0;
          std::printf("targets %s\n", ok ? "unchanged" : "CHANGED");
        }
        return ok ? 0 : 1;
      }
      std::fprintf(stderr, "rank %d: load succeeded although rank %s failed\n", rank.index,
                   arg.c_str());
      return 1;
    }
    if (mode == "die-save") {
      dcpp::SaveOptions options;
      options.ranks.process_group = group;
      DyingWriter writer(dir, rank.index == std::stoi(arg));
      const auto start = std::chrono::steady_clock::now();
      try {
        dcpp::save(state("row", rank, false), writer, options);
      } catch (const dcpp::CheckpointError& error) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const bool committed = std::filesystem::exists(std::filesystem::path(dir) / ".metadata");
        std::printf("failed as expected (%s) after %.1f s: %s\n", dcpp::to_string(error.kind()),
                    seconds, error.what_without_backtrace());
        return seconds < 20 && !committed ? 0 : 1;
      }
      std::fprintf(stderr, "rank %d: save succeeded although rank %s died\n", rank.index,
                   arg.c_str());
      return 1;
    }
    if (mode == "fail" || mode == "fail-write") {
      struct Failing : dcpp::Stateful {
        dcpp::StateDict state_dict() override { throw std::runtime_error("disk on fire"); }
        void load_state_dict(const dcpp::StateDict&) override {}
      };
      dcpp::StateDict sd = state("row", rank, false);
      if (rank.index == std::stoi(arg) && mode == "fail") {
        sd.insert("broken", std::make_shared<Failing>());
      }
      if (rank.index == std::stoi(arg) && mode == "fail-write") {
        sd.insert("unpicklable",
                  c10::IValue(c10::make_intrusive<c10::ivalue::Future>(c10::IntType::get())));
      }
      dcpp::SaveOptions options;
      options.ranks.process_group = group;
      try {
        dcpp::save(sd, dir, options);
      } catch (const dcpp::CheckpointError& error) {
        const std::string message = error.what_without_backtrace();
        const std::string cause = mode == "fail" ? "disk on fire" : "while writing";
        const bool named = message.find("rank " + arg) != std::string::npos &&
                           message.find(cause) != std::string::npos;
        const bool committed = std::filesystem::exists(std::filesystem::path(dir) / ".metadata");
        std::printf("failed as expected (%s): %s\n", dcpp::to_string(error.kind()),
                    message.c_str());
        return named && !committed ? 0 : 1;
      }
      std::fprintf(stderr, "rank %d: save succeeded although rank %s failed\n", rank.index,
                   arg.c_str());
      return 1;
    }
  } catch (const dcpp::CheckpointError& error) {
    std::fprintf(stderr, "rank %d: %s\n", rank.index, error.what_without_backtrace());
    return 1;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // dcpp-launch --fork: the ranks fork from here
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODE DIR[,DIR...] LAYOUT[,LAYOUT...]|RANK\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "die-save") {
    std::signal(SIGTERM, SIG_IGN);  // dcpp-launch stops the survivors; they must fail by themselves
  }
  const auto timeout = mode == "die-save" ? std::chrono::seconds(3) : std::chrono::seconds(60);
  auto group =
      dcpp::make_gloo_process_group_from_env(dcpp::ProcessGroupOptions().with_timeout(timeout));
  const Rank rank{group->getRank(), group->getSize()};
  const bool batched = mode == "save" || mode == "load" || mode == "fixture" || mode == "whole" ||
                       mode == "hf-save" || mode == "hf-load" || mode == "read-once";
  std::vector<std::string> args =
      batched ? dcpp::test::split_at_commas(argv[3]) : std::vector{std::string(argv[3])};
  std::vector<std::string> dirs =
      batched ? dcpp::test::split_at_commas(argv[2]) : std::vector{std::string(argv[2])};
  if (dirs.size() == 1) {
    dirs.resize(args.size(), dirs.front());
  }
  if (args.size() == 1) {
    args.resize(dirs.size(), args.front());
  }
  if (dirs.size() != args.size()) {
    std::fprintf(stderr, "%zu directories for %zu layouts\n", dirs.size(), args.size());
    return 2;
  }
  int status = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const int code = run(mode, dirs[i], args[i], group, rank);
    if (code != 0) {
      std::fprintf(stderr, "rank %d: %s %s %s exited %d\n", rank.index, mode.c_str(),
                   dirs[i].c_str(), args[i].c_str(), code);
      status = status == 0 ? code : status;
    }
  }
  return status;
}
