// The StorageReader hooks a reader may leave alone: plans pass through unchanged.

#include <dcpp/storage/storage_reader.h>

namespace dcpp {

LoadPlan StorageReader::prepare_local_plan(LoadPlan plan) { return plan; }

std::vector<LoadPlan> StorageReader::prepare_global_plan(std::vector<LoadPlan> plans) {
  return plans;
}

bool StorageReader::is_shared_storage() const { return false; }

}  // namespace dcpp
