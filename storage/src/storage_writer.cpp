// The StorageWriter defaults: plans pass through, saving without collectives is refused until a
// writer opts in, and a failed save leaves nothing to undo.

#include <dcpp/storage/storage_writer.h>

#include <dcpp/core/checkpoint_error.h>

namespace dcpp {

void StorageWriter::set_up_without_collectives(int rank) {
  throw CheckpointError(
      ErrorKind::kUsage,
      "rank " + std::to_string(rank) +
          ": this storage writer cannot save without collectives (it does not "
          "implement set_up_without_collectives); save with collectives, or use the "
          "file system writer");
}

SavePlan StorageWriter::prepare_local_plan(SavePlan plan) { return plan; }

void StorageWriter::abort_save() {}

}  // namespace dcpp
