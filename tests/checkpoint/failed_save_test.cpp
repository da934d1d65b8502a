// A failed save leaves no data file of its own behind (issue 58): every rank removes what it wrote
// for it, whichever rank failed (its writer, its planner, a peer), and a previous checkpoint in the
// directory stays whole; a save whose commit happened before a failure keeps its files. Ranks are
// threads of this process (rank_threads.h).

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/planner/save_planner.h>
#include <dcpp/storage/filesystem_writer.h>

#include <set>

namespace fs = std::filesystem;
using dcpp::test::on_ranks;
using dcpp::test::TempDir;

namespace {

constexpr int64_t kFailedSaveElements = 32;  // per rank and tensor

// Rank `rank`'s part of 2 ranks' checkpoint: shards of "a" and "b", values depending on `seed`.
dcpp::StateDict failed_save_state(int seed, int rank) {
  dcpp::StateDict sd;
  for (const char* key : {"a", "b"}) {
    const at::Tensor mine =
        at::arange(kFailedSaveElements, at::kFloat).add(seed * 1000 + rank * 100 + (*key - 'a'));
    sd.insert(key, dcpp::ShardedTensor({2 * kFailedSaveElements},
                                       {{mine, {rank * kFailedSaveElements}}}));
  }
  return sd;
}

// Requires `dir` to hold failed_save_state(seed, *) bit for bit.
void require_failed_save_checkpoint(const fs::path& dir, int seed) {
  dcpp::StateDict target;
  target.insert("a", at::zeros({2 * kFailedSaveElements}, at::kFloat));
  target.insert("b", at::zeros({2 * kFailedSaveElements}, at::kFloat));
  dcpp::load(target, dir);
  for (const char* key : {"a", "b"}) {
    std::vector<at::Tensor> parts;
    for (int rank = 0; rank < 2; ++rank) {
      parts.push_back(
          failed_save_state(seed, rank).at(key).sharded_tensor().local_shards()[0].tensor);
    }
    INFO("key " << key);
    REQUIRE(dcpp::test::bitwise_equal(target.at(key).tensor(), at::cat(parts)));
  }
}

std::set<std::string> failed_save_files(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

std::size_t data_files_in(const std::set<std::string>& names) {
  return static_cast<std::size_t>(
      std::count_if(names.begin(), names.end(), [](const std::string& n) {
        return n.size() > 7 && n.compare(n.size() - 7, 7, ".distcp") == 0;
      }));
}

// How a rank's part of the save fails.
enum class Failure {
  kNone,
  kAfterWriting,  // its writer's write_data throws once the base class wrote every file
  kWhileWriting,  // its planner throws for item "b", after "a" went into the same file
  kAfterCommit,   // the coordinator's finish throws once the base class committed
};

// A FileSystemWriter whose write_data or finish fails as told.
class FailingWriter final : public dcpp::FileSystemWriter {
 public:
  FailingWriter(const fs::path& dir, Failure failure)
      : FileSystemWriter(
            dir, dcpp::FileSystemWriterOptions().with_sync_files(false).with_overwrite(true)),
        failure_(failure) {}
  std::vector<dcpp::WriteResult> write_data(const dcpp::SavePlan& plan,
                                            dcpp::SavePlanner& planner) override {
    std::vector<dcpp::WriteResult> results = FileSystemWriter::write_data(plan, planner);
    if (failure_ == Failure::kAfterWriting) {
      throw dcpp::CheckpointError(dcpp::ErrorKind::kIo, "injected failure after writing");
    }
    return results;
  }
  void finish(dcpp::Metadata metadata,
              const std::vector<std::vector<dcpp::WriteResult>>& results) override {
    FileSystemWriter::finish(std::move(metadata), results);
    if (failure_ == Failure::kAfterCommit) {
      throw dcpp::CheckpointError(dcpp::ErrorKind::kIo, "injected failure after the commit");
    }
  }

 private:
  Failure failure_;
};

// A planner that fails on item "b", which its writer reaches after writing "a" into the file.
class FailingPlanner final : public dcpp::DefaultSavePlanner {
 protected:
  dcpp::WriteItemData transform_object(const dcpp::WriteItem& item,
                                       dcpp::WriteItemData object) override {
    if (item.index.fqn == "b") {
      throw dcpp::CheckpointError(dcpp::ErrorKind::kUsage, "injected failure while writing b");
    }
    return DefaultSavePlanner::transform_object(item, std::move(object));
  }
};

// Saves failed_save_state(seed, *) on 2 rank threads into `dir`, rank 1 failing as told (or rank
// 0 for kAfterCommit: the coordinator); returns each rank's error ("" when its save returned).
std::vector<std::string> save_failing(const fs::path& dir, int seed, Failure failure) {
  std::vector<std::string> errors(2);
  on_ranks(2, "failing", [&](int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
    const int failing_rank = failure == Failure::kAfterCommit ? 0 : 1;
    FailingWriter writer(dir, rank == failing_rank ? failure : Failure::kNone);
    dcpp::SaveOptions options;
    options.ranks.process_group = group;
    if (rank == failing_rank && failure == Failure::kWhileWriting) {
      options.planner = std::make_shared<FailingPlanner>();
    }
    try {
      dcpp::save(failed_save_state(seed, rank), writer, options);
    } catch (const dcpp::CheckpointError& error) {
      errors[rank] = error.what();
    }
  });
  return errors;
}

}  // namespace

TEST_CASE("a save that fails on one rank removes every rank's data files of it") {
  const Failure failure = GENERATE(Failure::kAfterWriting, Failure::kWhileWriting);
  const std::string message = failure == Failure::kAfterWriting
                                  ? "injected failure after writing"
                                  : "injected failure while writing b";
  INFO(message);

  SECTION("into a fresh directory") {
    TempDir dir;
    const std::vector<std::string> errors = save_failing(dir.path(), 1, failure);
    for (const std::string& error : errors) {
      CHECK_THAT(error, Catch::Contains("rank 1: ") && Catch::Contains(message));
    }
    const std::set<std::string> left = failed_save_files(dir.path());
    INFO("left: " << Catch::StringMaker<std::set<std::string>>::convert(left));
    CHECK(left.empty());
  }

  SECTION("replacing a checkpoint, which stays whole") {
    TempDir dir;
    REQUIRE(save_failing(dir.path(), 1, Failure::kNone) == std::vector<std::string>(2));
    const std::set<std::string> before = failed_save_files(dir.path());
    REQUIRE(data_files_in(before) == 2);
    const std::vector<std::string> errors = save_failing(dir.path(), 2, failure);
    for (const std::string& error : errors) {
      CHECK_THAT(error, Catch::Contains(message));
    }
    // The failed save's tagged data files are gone; the previous checkpoint's are all there.
    CHECK(failed_save_files(dir.path()) == before);
    require_failed_save_checkpoint(dir.path(), 1);
    // And the directory takes the next save.
    REQUIRE(save_failing(dir.path(), 3, Failure::kNone) == std::vector<std::string>(2));
    CHECK(failed_save_files(dir.path()).size() == before.size());
    require_failed_save_checkpoint(dir.path(), 3);
  }
}

TEST_CASE("a save that failed after its commit keeps its files on every rank") {
  // The coordinator's finish committed `.metadata`, then failed: the save reports the failure,
  // but the checkpoint is complete, and no rank may remove a file of it.
  TempDir dir;
  const std::vector<std::string> errors = save_failing(dir.path(), 4, Failure::kAfterCommit);
  for (const std::string& error : errors) {
    CHECK_THAT(error, Catch::Contains("injected failure after the commit"));
  }
  const std::set<std::string> left = failed_save_files(dir.path());
  CHECK(data_files_in(left) == 2);
  CHECK(left.count(".metadata") == 1);
  CHECK(left.count(".dcpp-save.lock") == 0);
  require_failed_save_checkpoint(dir.path(), 4);
}
