// MemoryStepCache: what a series of memory steps reuses from the step before (memory_step.h).

#include "format/byte_io.h"
#include "format/item_codec.h"
#include "format/metadata_pickle.h"
#include "storage/memory_step_cache_state.h"

namespace dcpp {
namespace {

bool same_storage(const StorageMetadata& a, const StorageMetadata& b) {
  if (a.index() != b.index()) return false;
  const auto* ta = std::get_if<TensorStorageMetadata>(&a);
  if (ta == nullptr) return true;  // bytes: nothing more to compare
  const auto& tb = std::get<TensorStorageMetadata>(b);
  const TensorProperties &pa = ta->properties, &pb = tb.properties;
  return pa.dtype == pb.dtype && pa.layout == pb.layout && pa.requires_grad == pb.requires_grad &&
         pa.memory_format == pb.memory_format && pa.pin_memory == pb.pin_memory &&
         ta->size == tb.size && ta->chunks == tb.chunks;
}

bool same_metadata(const Metadata& a, const Metadata& b) {
  if (a.state_dict_metadata.size() != b.state_dict_metadata.size() ||
      a.storage_data.size() != b.storage_data.size() || a.planner_data != b.planner_data ||
      a.version != b.version || a.storage_meta.has_value() != b.storage_meta.has_value()) {
    return false;
  }
  for (std::size_t i = 0; i < a.state_dict_metadata.size(); ++i) {
    if (a.state_dict_metadata[i].first != b.state_dict_metadata[i].first ||
        !same_storage(a.state_dict_metadata[i].second, b.state_dict_metadata[i].second)) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.storage_data.size(); ++i) {
    const auto& [index_a, info_a] = a.storage_data[i];
    const auto& [index_b, info_b] = b.storage_data[i];
    // MetadataIndex::index is a hint, compared too: the pickle holds it.
    if (!(index_a == index_b) || index_a.index != index_b.index ||
        info_a.relative_path != info_b.relative_path || info_a.offset != info_b.offset ||
        info_a.length != info_b.length ||
        info_a.transform_descriptors != info_b.transform_descriptors) {
      return false;
    }
  }
  if (!a.storage_meta) return true;
  const StorageMeta &ma = *a.storage_meta, &mb = *b.storage_meta;
  return ma.checkpoint_id == mb.checkpoint_id && ma.save_id == mb.save_id &&
         ma.load_id == mb.load_id && ma.modules == mb.modules;
}

}  // namespace

MemoryStepCache::MemoryStepCache() : state_(std::make_unique<State>()) {}
MemoryStepCache::~MemoryStepCache() = default;
int64_t MemoryStepCache::reused_metadata() const { return state_->metadata_reused; }
int64_t MemoryStepCache::pickled_metadata() const { return state_->metadata_pickled; }
int64_t MemoryStepCache::repeated_layouts() const { return state_->layouts_repeated; }

const std::string& MemoryStepCache::State::pickled_metadata(const Metadata& next) {
  if (metadata && same_metadata(*metadata, next)) {
    ++metadata_reused;
    return metadata_pickle;
  }
  metadata.reset();  // until the pickle below is made
  metadata_pickle = detail::encode_metadata(next);
  metadata = next;
  ++metadata_pickled;
  return metadata_pickle;
}

const std::string& MemoryStepCache::State::value_archive(const std::string& key,
                                                         const std::string& pickle) {
  auto& [last_pickle, archive] = values[key];
  if (archive.empty() || last_pickle != pickle) {
    detail::MemorySink sink;
    detail::write_pickled_bytes_item(sink, pickle, {});
    archive = std::move(sink.buffer());
    last_pickle = pickle;
  }
  return archive;
}

}  // namespace dcpp
