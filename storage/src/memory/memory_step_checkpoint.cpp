// write_memory_steps_as_checkpoint: memory steps written out as a DCP checkpoint directory, for a
// memory tier whose newest step must reach the disk (a job that died, a host being drained).

#include "format/checksum_file.h"
#include "format/crc32.h"
#include "format/file_io.h"
#include "format/item_codec.h"
#include "format/metadata_pickle.h"
#include "storage/memory_payload.h"
#include "storage/per_rank_metadata.h"

#include "core/durable_file.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/memory_step.h>

#include <ATen/ATen.h>

#include <algorithm>

namespace dcpp {
namespace fs = std::filesystem;

namespace {

// Writes `payload`'s items into `directory`/`file`; returns its metadata with their new places,
// and adds each item's checksum to `checksums`.
Metadata write_rank_data_file(const detail::MemoryPayload& payload, const std::string& where,
                              const fs::path& directory, const std::string& file, bool sync_files,
                              std::vector<detail::ItemChecksum>& checksums) {
  Metadata metadata = payload.metadata;
  detail::File out(directory / file, detail::File::Mode::kCreateTruncate);
  detail::FileSink sink(out);
  for (auto& [index, info] : metadata.storage_data) {
    const uint64_t offset = sink.position();
    uint64_t length = 0;
    uint32_t crc = 0;
    if (index.offset) {
      const detail::MemoryChunk chunk =
          detail::memory_chunk(payload.metadata, index, info, payload, where);
      // The bytes are read only: write_tensor_item reads the view, never writes it.
      const at::Tensor tensor =
          at::from_blob(const_cast<char*>(chunk.bytes.data()), chunk.chunk->sizes,
                        at::TensorOptions().dtype(chunk.tensor->properties.dtype));
      const detail::WrittenItem written = detail::write_tensor_item(sink, tensor);
      length = written.length;
      crc = written.crc32;
    } else {
      const std::string_view bytes = detail::memory_value_bytes(info, payload, index.fqn, where);
      sink.write(bytes.data(), bytes.size());
      length = bytes.size();
      crc = detail::crc32(0, bytes.data(), bytes.size());
    }
    info = StorageInfo{file, static_cast<int64_t>(offset), static_cast<int64_t>(length), {}};
    checksums.push_back(detail::ItemChecksum{file, offset, length, crc, index.fqn});
  }
  sink.flush();
  if (sync_files) out.sync();
  out.close();
  return metadata;
}

}  // namespace

Metadata write_memory_steps_as_checkpoint(std::vector<MemoryStep> steps, const fs::path& directory,
                                          bool sync_files) {
  if (steps.empty()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "no memory step to write into '" + directory.string() + "'");
  }
  fs::create_directories(directory);
  std::vector<detail::RankMetadata> ranks;
  std::vector<detail::ItemChecksum> checksums;
  for (const MemoryStep& step : steps) {
    const detail::MemoryPayload payload = detail::decode_memory_payload(step.bytes, step.region);
    const std::string file = "__" + std::to_string(payload.rank) + "_0.distcp";
    ranks.push_back(detail::RankMetadata{
        payload.rank, step.region,
        write_rank_data_file(payload, step.region, directory, file, sync_files, checksums)});
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (std::size_t i = 1; i < ranks.size(); ++i) {
    if (ranks[i].rank == ranks[i - 1].rank) {
      throw CheckpointError(ErrorKind::kUsage, "memory steps " + ranks[i - 1].path + " and " +
                                                   ranks[i].path + " both hold rank " +
                                                   std::to_string(ranks[i].rank));
    }
  }
  Metadata merged = ranks.size() == 1 ? ranks.front().metadata : detail::merge_rank_metadata(ranks);
  // As every save: the checksum file first, durable before the `.metadata` it names.
  const std::string metadata_bytes = detail::encode_metadata(merged);
  detail::SaveChecksums save;
  save.metadata_size = metadata_bytes.size();
  save.metadata_crc32 = detail::crc32(0, metadata_bytes.data(), metadata_bytes.size());
  save.items = std::move(checksums);
  detail::write_file_durably(directory / detail::kChecksumFileName,
                             detail::encode_checksum_file({save}), sync_files);
  detail::write_file_durably(directory / ".metadata", metadata_bytes, sync_files);
  return merged;
}

}  // namespace dcpp
