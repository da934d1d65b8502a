// The coordinator's read-once schedule (read_once_schedule.h): shared boxes found by key, each
// given to the least loaded of the ranks that need it, largest first.

#include "read_once_schedule.h"

#include "planner/plan_codec.h"

#include <dcpp/core/checkpoint_error.h>

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

namespace dcpp::detail {

namespace {

void append_ints(std::string& key, const std::vector<int64_t>& values) {
  key += std::to_string(values.size());
  for (int64_t value : values) {
    key += ',';
    key += std::to_string(value);
  }
  key += ';';
}

// The bytes a rank spends reading `item`: its box's, and the rest of the stored item around the
// chunk's data (an archive's headers, which a reader reads with any box of it); a value's stored
// bytes.
class ItemSizes {
 public:
  explicit ItemSizes(const Metadata& metadata) {
    for (const auto& [index, info] : metadata.storage_data) {
      stored_.emplace(index, info.length);
    }
    for (const auto& [key, storage] : metadata.state_dict_metadata) {
      if (const auto* tensor = std::get_if<TensorStorageMetadata>(&storage)) {
        const auto element = static_cast<int64_t>(c10::elementSize(tensor->properties.dtype));
        element_sizes_.emplace(key, element);
        for (const ChunkStorageMetadata& chunk : tensor->chunks) {
          const auto stored = stored_.find(MetadataIndex{key, chunk.offsets, std::nullopt});
          if (stored != stored_.end()) {
            const int64_t data = volume(chunk.sizes, element);
            overheads_.emplace(stored->first,
                               stored->second > data ? stored->second - data : int64_t{0});
          }
        }
      }
    }
  }

  int64_t operator()(const ReadItem& item) const {
    if (item.type == LoadItemType::kBytes) {
      const auto stored = stored_.find(item.storage_index);
      return stored == stored_.end() ? 1 : std::max<int64_t>(stored->second, 1);
    }
    const auto element = element_sizes_.find(item.storage_index.fqn);
    const auto overhead = overheads_.find(item.storage_index);
    const int64_t data =
        volume(item.lengths, element == element_sizes_.end() ? 1 : element->second);
    const int64_t rest = overhead == overheads_.end() ? 0 : overhead->second;
    return data > std::numeric_limits<int64_t>::max() - rest ? data : data + rest;
  }

 private:
  // Saturating: sizes come from a checkpoint, which may be hostile.
  static int64_t volume(const std::vector<int64_t>& sizes, int64_t element = 1) {
    int64_t bytes = element;
    for (int64_t size : sizes) {
      if (__builtin_mul_overflow(bytes, std::max<int64_t>(size, 0), &bytes)) {
        return std::numeric_limits<int64_t>::max();
      }
    }
    return bytes;
  }

  std::map<MetadataIndex, int64_t> stored_;
  std::map<MetadataIndex, int64_t> overheads_;
  std::unordered_map<std::string, int64_t> element_sizes_;
};

void add_saturating(int64_t& total, int64_t bytes) {
  if (__builtin_add_overflow(total, bytes, &total)) {
    total = std::numeric_limits<int64_t>::max();
  }
}

// The read items of every plan that read one saved box.
struct SharedBox {
  int64_t bytes = 0;
  std::vector<std::pair<int, std::size_t>> readers;  // (rank, item index in its plan)
};

int parse_rank(const std::string& text, int size) {
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || value >= size) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "checkpoint load: the coordinator's read-once schedule names rank '" +
                              text + "' of " + std::to_string(size) +
                              "; every rank must run the same dcpp build");
  }
  return value;
}

}  // namespace

std::string saved_box_key(const ReadItem& item) {
  std::string key(1, item.type == LoadItemType::kTensor ? 't' : 'b');
  key += std::to_string(item.storage_index.fqn.size());
  key += ':';
  key += item.storage_index.fqn;
  if (item.storage_index.offset) {
    append_ints(key, *item.storage_index.offset);
  } else {
    key += '-';
  }
  append_ints(key, item.storage_offsets);
  append_ints(key, item.lengths);
  return key;
}

std::vector<ReadOnceSchedule> schedule_read_once(std::vector<LoadPlan>& plans,
                                                 const Metadata& metadata) {
  const ItemSizes size_of(metadata);
  std::vector<SharedBox> boxes;
  std::unordered_map<std::string, std::size_t> box_of_key;
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    const std::vector<ReadItem>& items = plans[rank].items;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto [found, added] = box_of_key.emplace(saved_box_key(items[i]), boxes.size());
      if (added) {
        boxes.push_back(SharedBox{size_of(items[i]), {}});
      }
      boxes[found->second].readers.emplace_back(static_cast<int>(rank), i);
    }
  }
  const auto shared = [](const SharedBox& box) {
    return box.readers.front().first != box.readers.back().first;  // readers are in rank order
  };
  // What each rank reads anyway, then the shared boxes, largest first, each to the least loaded.
  std::vector<int64_t> load(plans.size(), 0);
  std::vector<const SharedBox*> to_assign;
  for (const SharedBox& box : boxes) {
    if (!shared(box)) {
      for (std::size_t n = 0; n < box.readers.size(); ++n) {
        add_saturating(load[static_cast<std::size_t>(box.readers.front().first)], box.bytes);
      }
    } else {
      to_assign.push_back(&box);
    }
  }
  std::stable_sort(to_assign.begin(), to_assign.end(),
                   [](const SharedBox* a, const SharedBox* b) { return a->bytes > b->bytes; });
  std::vector<std::vector<bool>> received(plans.size());
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    received[rank].assign(plans[rank].items.size(), false);
  }
  std::map<std::pair<int, int>, std::vector<ReadItem>> transfers;  // (from, to): the global order
  for (const SharedBox* box : to_assign) {
    int reader = box->readers.front().first;
    for (const auto& [rank, item] : box->readers) {
      if (load[static_cast<std::size_t>(rank)] < load[static_cast<std::size_t>(reader)]) {
        reader = rank;
      }
    }
    add_saturating(load[static_cast<std::size_t>(reader)], box->bytes);
    for (const auto& [rank, item] : box->readers) {
      if (rank != reader) {
        received[static_cast<std::size_t>(rank)][item] = true;
        transfers[{reader, rank}].push_back(plans[static_cast<std::size_t>(rank)].items[item]);
      }
    }
  }
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    std::vector<ReadItem> kept;
    for (std::size_t i = 0; i < plans[rank].items.size(); ++i) {
      if (!received[rank][i]) {
        kept.push_back(std::move(plans[rank].items[i]));
      }
    }
    plans[rank].items = std::move(kept);
  }
  std::vector<ReadOnceSchedule> schedules(plans.size());
  for (auto& [ranks, items] : transfers) {
    const ReadOnceTransfer transfer{ranks.first, ranks.second, std::move(items)};
    schedules[static_cast<std::size_t>(transfer.from)].transfers.push_back(transfer);
    schedules[static_cast<std::size_t>(transfer.to)].transfers.push_back(transfer);
  }
  return schedules;
}

std::string encode_read_once_schedule(const ReadOnceSchedule& schedule) {
  std::vector<std::string> transfers;
  for (const ReadOnceTransfer& transfer : schedule.transfers) {
    LoadPlan items;
    items.items = transfer.items;
    transfers.push_back(encode_strings(
        {std::to_string(transfer.from), std::to_string(transfer.to), encode_load_plan(items)}));
  }
  return encode_strings(transfers);
}

ReadOnceSchedule decode_read_once_schedule(std::string_view bytes, int rank, int size) {
  ReadOnceSchedule schedule;
  for (const std::string& encoded : decode_strings(bytes)) {
    const std::vector<std::string> parts = decode_strings(encoded);
    if (parts.size() != 3) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "checkpoint load: a transfer of the coordinator's read-once schedule "
                            "has " +
                                std::to_string(parts.size()) +
                                " parts, not 3; every rank must run the same dcpp build");
    }
    ReadOnceTransfer transfer;
    transfer.from = parse_rank(parts[0], size);
    transfer.to = parse_rank(parts[1], size);
    if (transfer.from == transfer.to || (transfer.from != rank && transfer.to != rank)) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "checkpoint load: the coordinator's read-once schedule for rank " +
                                std::to_string(rank) + " has a transfer from rank " + parts[0] +
                                " to rank " + parts[1] +
                                "; every rank must run the same dcpp build");
    }
    transfer.items = decode_load_plan(parts[2]).items;
    schedule.transfers.push_back(std::move(transfer));
  }
  return schedule;
}

}  // namespace dcpp::detail
