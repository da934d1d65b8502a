#include "dcp_item_writer.h"
#include "parallel_for.h"

#include "core/logging.h"
#include "format/crc32.h"
#include "format/item_codec.h"
#include "format/metadata_pickle.h"
#include "format/transform_descriptors.h"
#include "format/zstd_stream.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>

namespace dcpp::detail {

std::vector<std::vector<const WriteItem*>> split_by_size_and_type(
    int bins, const std::vector<WriteItem>& items) {
  std::vector<std::vector<const WriteItem*>> buckets(static_cast<std::size_t>(std::max(bins, 1)));
  std::vector<int64_t> sizes(buckets.size(), 0);
  std::vector<const WriteItem*> tensors;
  std::size_t next = 0;
  for (const WriteItem& item : items) {
    if (item.is_tensor()) {
      tensors.push_back(&item);
    } else {
      buckets[next++ % buckets.size()].push_back(&item);
    }
  }
  std::stable_sort(tensors.begin(), tensors.end(), [](const WriteItem* a, const WriteItem* b) {
    return a->tensor_storage_size() > b->tensor_storage_size();
  });
  for (const WriteItem* item : tensors) {
    const std::size_t smallest =
        static_cast<std::size_t>(std::min_element(sizes.begin(), sizes.end()) - sizes.begin());
    buckets[smallest].push_back(item);
    sizes[smallest] += item->tensor_storage_size();
  }
  return buckets;
}

void assign_file_prefixes(std::vector<SavePlan>& plans, const std::string& tag) {
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    if (plans[rank].storage_data.empty()) {
      plans[rank].storage_data = data_file_prefix(static_cast<int>(rank), tag);
    }
  }
}

std::vector<WriteResult> write_data_files(
    const SavePlan& plan, bool single_file_per_rank, int thread_count,
    const std::function<std::vector<WriteResult>(
        const std::string& name, const std::vector<const WriteItem*>& items)>& write_file) {
  if (plan.storage_data.empty()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "save plan has no file prefix: prepare_global_plan was not applied");
  }
  std::vector<std::vector<const WriteItem*>> files;
  if (single_file_per_rank) {
    files = split_by_size_and_type(thread_count, plan.items);
  } else {
    for (const WriteItem& item : plan.items) files.push_back({&item});
  }
  std::vector<std::vector<WriteResult>> results(files.size());
  parallel_for(files.size(), thread_count, [&](std::size_t n) {
    results[n] = write_file(data_file_name(plan.storage_data, n), files[n]);
  });
  std::vector<WriteResult> all;
  for (auto& file_results : results)
    all.insert(all.end(), file_results.begin(), file_results.end());
  return all;
}

std::set<std::string> add_write_results(Metadata& metadata,
                                        const std::vector<std::vector<WriteResult>>& results) {
  std::set<std::string> referenced;
  std::size_t count = metadata.storage_data.size();
  for (const auto& rank_results : results) count += rank_results.size();
  metadata.storage_data.reserve(count);
  for (const auto& rank_results : results) {
    for (const WriteResult& result : rank_results) {
      metadata.storage_data.emplace_back(result.index, result.storage_data);
      referenced.insert(result.storage_data.relative_path);
    }
  }
  return referenced;
}

std::string encode_metadata_with_results(const Metadata& metadata,
                                         const std::vector<std::vector<WriteResult>>& results,
                                         std::set<std::string>* referenced) {
  std::vector<StorageEntryRef> entries;
  std::size_t count = 0;
  for (const auto& rank_results : results) count += rank_results.size();
  entries.reserve(count);
  const std::string* last_file = nullptr;  // results come file by file
  for (const auto& rank_results : results) {
    for (const WriteResult& result : rank_results) {
      entries.push_back(StorageEntryRef{&result.index, &result.storage_data});
      if (last_file == nullptr || *last_file != result.storage_data.relative_path) {
        referenced->insert(result.storage_data.relative_path);
        last_file = &result.storage_data.relative_path;
      }
    }
  }
  return encode_metadata(metadata, entries);
}

std::vector<WriteResult> write_data_file(ByteSink& sink, const std::string& name,
                                         const std::vector<const WriteItem*>& items,
                                         SavePlanner& planner, Compression compression,
                                         int compression_level) {
  std::vector<WriteResult> results;
  for (bool tensors : {false, true}) {
    for (const WriteItem* item : items) {
      if (item->is_tensor() != tensors) {
        continue;
      }
      const uint64_t offset = sink.position();
      WriteItemData data = planner.resolve_data(*item);
      const auto write = [&](ByteSink& to) {
        if (const auto* tensor = std::get_if<at::Tensor>(&data)) {
          return write_tensor_item(to, *tensor);
        }
        return write_bytes_item(to, std::get<c10::IValue>(data));
      };
      WrittenItem written;
      std::vector<std::string> descriptors;
      if (compression == Compression::kZstd) {
        ZstdSink compressed(sink, compression_level);
        const WrittenItem archive = write(compressed);
        compressed.finish();
        written = WrittenItem{compressed.stored_length(), compressed.stored_crc32(),
                              archive.content_crc32};
        descriptors.push_back(kZstdDescriptor);
      } else {
        written = write(sink);
      }
      WriteResult result;
      result.index = item->index;
      result.size_in_bytes = static_cast<int64_t>(written.length);
      result.storage_data =
          StorageInfo{name, static_cast<int64_t>(offset), static_cast<int64_t>(written.length),
                      std::move(descriptors)};
      result.crc32 = written.crc32;
      result.content_crc32 = written.content_crc32;
      results.push_back(std::move(result));
    }
  }
  return results;
}

std::string checksum_file_of(std::string_view metadata_bytes,
                             const std::vector<std::vector<WriteResult>>& results,
                             const std::optional<SaveChecksums>& replaced) {
  std::size_t count = 0;
  std::size_t expected = 0;
  bool items_known = true;  // not when an item was not written by dcpp's item writer
  for (const auto& rank_results : results) {
    for (const WriteResult& result : rank_results) {
      items_known = items_known && result.crc32.has_value();
      expected += ChecksumFileEncoder::item_bytes(result.storage_data.relative_path.size(),
                                                  result.index.fqn.size());
      ++count;
    }
  }
  if (!items_known) expected = 0;
  if (replaced && replaced->items) {
    for (const ItemChecksum& item : *replaced->items) {
      expected += ChecksumFileEncoder::item_bytes(item.file.size(), item.key.size());
    }
  }
  ChecksumFileEncoder encoder(expected + 128);
  encoder.save(metadata_bytes.size(), crc32(0, metadata_bytes.data(), metadata_bytes.size()),
               items_known ? std::optional<uint64_t>(count) : std::nullopt);
  if (items_known) {
    for (const auto& rank_results : results) {
      for (const WriteResult& result : rank_results) {
        encoder.item(
            result.storage_data.relative_path, static_cast<uint64_t>(result.storage_data.offset),
            static_cast<uint64_t>(result.storage_data.length), *result.crc32, result.index.fqn);
      }
    }
  }
  if (replaced) {
    encoder.save(replaced->metadata_size, replaced->metadata_crc32,
                 replaced->items ? std::optional<uint64_t>(replaced->items->size()) : std::nullopt);
    if (replaced->items) {
      for (const ItemChecksum& item : *replaced->items) {
        encoder.item(item.file, item.offset, item.length, item.crc32, item.key);
      }
    }
  }
  return encoder.finish();
}

SaveChecksums replaced_save_checksums(std::string_view old_metadata,
                                      const std::optional<std::string>& old_checksum_file,
                                      const std::string& checksum_name) {
  SaveChecksums previous;
  previous.metadata_size = old_metadata.size();
  previous.metadata_crc32 = crc32(0, old_metadata.data(), old_metadata.size());
  if (!old_checksum_file) return previous;
  try {
    const auto saves = decode_checksum_file(*old_checksum_file, checksum_name);
    if (const SaveChecksums* found = find_save(saves, old_metadata)) {
      previous.items = found->items;
    }
  } catch (const CheckpointError& error) {
    // A damaged checksum file: the old checkpoint keeps its .metadata's checksum only.
    logger().warn("the checksum file being replaced is unreadable: {}", error.what());
  }
  return previous;
}

}  // namespace dcpp::detail
