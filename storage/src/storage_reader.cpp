// The StorageReader hooks a reader may leave alone: plans pass through unchanged.

#include <dcpp/storage/storage_reader.h>

#include <dcpp/core/checkpoint_error.h>

namespace dcpp {

void StorageReader::narrow_metadata(const MetadataSelection&) {}

LoadPlan StorageReader::prepare_local_plan(LoadPlan plan) { return plan; }

std::vector<LoadPlan> StorageReader::prepare_global_plan(std::vector<LoadPlan> plans) {
  return plans;
}

bool StorageReader::is_shared_storage() const { return false; }

std::optional<std::string> StorageReader::metadata_to_share() { return std::nullopt; }

Metadata StorageReader::read_shared_metadata(const std::string&) {
  throw CheckpointError(ErrorKind::kUsage,
                        "this storage reader shares its metadata (metadata_to_share) but does not "
                        "implement read_shared_metadata; implement both or neither");
}

}  // namespace dcpp
