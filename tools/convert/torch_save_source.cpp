// A file written by Python's `torch.save(state_dict)` as a CheckpointSource. data.pkl is decoded
// by dcpp's restricted unpickler (nothing is ever called) with every tensor standing in as a meta
// tensor; a tensor's storage record is read only when the tensor is asked for.

#include "convert/checkpoint_source.h"
#include "convert/conversion.h"

#include "format/file_io.h"
#include "format/pickle/torch_pickle.h"
#include "format/zip/zip_blob_reader.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <unordered_map>

namespace dcpp::tools {

namespace {

bool contains_tensor(const c10::IValue& value) {
  if (value.isTensor()) return true;
  if (value.isTuple()) {
    for (const c10::IValue& e : value.toTupleRef().elements()) {
      if (contains_tensor(e)) return true;
    }
  } else if (value.isList()) {
    for (const c10::IValue& e : value.toListRef()) {
      if (contains_tensor(e)) return true;
    }
  } else if (value.isGenericDict()) {
    for (const auto& e : value.toGenericDict()) {
      if (contains_tensor(e.key()) || contains_tensor(e.value())) return true;
    }
  }
  return false;
}

class TorchSaveSource final : public CheckpointSource {
 public:
  explicit TorchSaveSource(const std::filesystem::path& path)
      : path_(path), file_(path, detail::File::Mode::kRead) {
    source_ = std::make_unique<detail::FileRangeSource>(file_, 0, file_.size(),
                                                        "torch.save file " + path.string());
    zip_ = std::make_unique<detail::ZipBlobReader>(*source_);
    const std::string pickle = zip_->read_string(zip_->get("data.pkl"), true);
    std::unordered_map<const void*, detail::TensorRef> refs;
    const c10::IValue root = detail::decode_value_pickle(
        pickle,
        [&](const detail::TensorRef& ref) {
          at::Tensor placeholder =
              at::empty(ref.sizes, at::TensorOptions().dtype(ref.dtype).device(at::kMeta));
          refs.emplace(placeholder.unsafeGetTensorImpl(), ref);
          return placeholder;
        },
        source_->describe());
    StateValue tree(root);
    if (!tree.is_dict()) {
      throw CheckpointError(ErrorKind::kIncompatible,
                            "torch.save file " + path.string() + " holds a " + tree.kind_name() +
                                ", not a state dict (a dict at the top level)");
    }
    root_ = std::move(tree.dict());
    for (const FlatEntry& flat : flatten_state_dict(root_)) {
      SourceEntry entry;
      entry.key = flat.key;
      entry.path = flat.path;
      entry.file = path.filename().string();
      if (flat.value->is_tensor()) {
        const at::Tensor& placeholder = flat.value->tensor();
        entry.is_tensor = true;
        entry.dtype = placeholder.scalar_type();
        entry.shape = placeholder.sizes().vec();
        refs_.emplace(flat.key, refs.at(placeholder.unsafeGetTensorImpl()));
      } else {
        values_.emplace(flat.key, flat.value);
      }
      entries_.push_back(std::move(entry));
    }
  }

  std::string format() const override { return "torch-save"; }
  const std::vector<SourceEntry>& entries() const override { return entries_; }

  at::Tensor read_tensor(const SourceEntry& entry) override {
    const detail::TensorRef& ref = refs_.at(entry.key);
    const std::string where = source_->describe() + ", key '" + entry.key + "'";
    const detail::ZipRecordInfo& record = zip_->get("data/" + ref.storage_key);
    const uint64_t element_size = c10::elementSize(ref.dtype);
    if (ref.storage_numel < 0 ||
        record.size != static_cast<uint64_t>(ref.storage_numel) * element_size) {
      throw CheckpointError(ErrorKind::kCorrupt, where + ": storage record data/" +
                                                     ref.storage_key + " holds " +
                                                     std::to_string(record.size) + " bytes, not " +
                                                     std::to_string(ref.storage_numel) +
                                                     " elements of " + c10::toString(ref.dtype));
    }
    // The view must lie inside its storage, however hostile data.pkl is.
    int64_t last = ref.storage_offset;
    bool empty = false;
    bool valid = ref.sizes.size() == ref.strides.size() && ref.storage_offset >= 0;
    for (std::size_t d = 0; valid && d < ref.sizes.size(); ++d) {
      valid = ref.sizes[d] >= 0 && ref.strides[d] >= 0 &&
              (ref.sizes[d] == 0 || ref.strides[d] <= (INT64_MAX - last) / ref.sizes[d]);
      empty = empty || ref.sizes[d] == 0;
      if (valid && ref.sizes[d] > 0) last += (ref.sizes[d] - 1) * ref.strides[d];
    }
    if (!valid || (!empty && last >= ref.storage_numel)) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            where + ": data.pkl describes a tensor view outside its storage");
    }
    at::Tensor storage = at::empty({ref.storage_numel}, at::TensorOptions().dtype(ref.dtype));
    zip_->read(record, storage.data_ptr(), true);
    return storage.as_strided(ref.sizes, ref.strides, ref.storage_offset).contiguous();
  }

  c10::IValue read_value(const SourceEntry& entry) override {
    // A list of plain values is a StateList leaf: back to the IValue it was decoded from.
    c10::IValue value = to_ivalue(*values_.at(entry.key));
    if (contains_tensor(value)) {
      throw CheckpointError(ErrorKind::kIncompatible,
                            source_->describe() + ", key '" + entry.key +
                                "': a tensor inside a tuple or a list of values is not supported");
    }
    return value;
  }

 private:
  std::filesystem::path path_;
  detail::File file_;
  std::unique_ptr<detail::FileRangeSource> source_;
  std::unique_ptr<detail::ZipBlobReader> zip_;
  StateDict root_;
  std::vector<SourceEntry> entries_;
  std::unordered_map<std::string, detail::TensorRef> refs_;
  std::unordered_map<std::string, const StateValue*> values_;
};

}  // namespace

std::unique_ptr<CheckpointSource> open_torch_save_source(const std::filesystem::path& file) {
  return std::make_unique<TorchSaveSource>(file);
}

}  // namespace dcpp::tools
