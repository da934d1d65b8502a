// The file system writer's commit protocol. Every rank writes its data files
// (`__<rank>_<n>.distcp`), flushes and fsyncs them, computing each item's CRC-32 as it writes it.
// Then the coordinator writes the checksum file (`.checksums.tmp`, fsync, rename to `.checksums`,
// fsync of the directory; checksum_file.h), then `.metadata.tmp`, fsyncs it, renames it to
// `.metadata` and fsyncs the directory: `.metadata` appears, complete, only after every byte it
// points at and its checksums are durable, so its presence marks a complete checkpoint.
//
// Saving into a directory that already holds a checkpoint is refused unless `overwrite` is set;
// then the new data files get names no existing file has (`__<rank>_<tag>_<n>.distcp`), so the old
// checkpoint stays intact and loadable until the rename replaces its `.metadata`, after which the
// coordinator removes the old checkpoint's data files.
//
// With compression (FileSystemWriterOptions::compression), each item is one zstd frame streamed
// into the data file as the archive is written; `.metadata` gives it the transform descriptor
// "stream.zstd/1" and the checksum file the CRC-32 of its stored (compressed) bytes.
//
// Without collectives (set_up_without_collectives, per_rank_metadata.h), rank r alone does all of
// this with its own names: data files `__<r>_<n>.distcp`, then `__<r>.checksums` (via `.tmp`),
// then `__<r>.metadata` (via `.tmp`); a replacing save removes only rank r's old data files. Such a
// save never replaces a `.metadata` checkpoint (it would still win over the new per-rank files, and
// no rank may remove it before every rank has committed). A collective save that replaces a
// per-rank checkpoint removes the per-rank metadata and checksum files after its commit.
//
// A save owns its directory (save_lock.h): the coordinator locks `.dcpp-save.lock` in set_up,
// before any rank writes a file of the save, and holds it until its finish ends or the save fails
// (abort_save); a second save into the directory meanwhile fails in its set_up, which the save's
// first step reports to every rank of its group before any of them writes. Without collectives
// each rank locks `.dcpp-save.<rank>.lock`, so the ranks' saves run side by side.
//
// A failed save (abort_save, on every rank) removes the files this rank's part of it created: its
// data files, whose names no committed checkpoint refers to (a fresh directory's, or a replacing
// save's tagged ones), and the coordinator's `.tmp` files. Not when this save's `.metadata` may
// have been committed: the coordinator knows whether it renamed it; another rank keeps its files
// when the directory's `.metadata` is not the file it found at set_up (the coordinator's finish
// committed, then failed). That rank compares what its own mount shows, so on storage the ranks do
// not share it removes its files (there is no checkpoint without them being gathered anyway).

#include <dcpp/storage/filesystem_writer.h>

#include "core/logging.h"
#include "dcp_item_writer.h"
#include "format/checksum_file.h"
#include "format/file_io.h"
#include "format/metadata_pickle.h"
#include "parallel_for.h"
#include "random_tag.h"
#include "save_lock.h"
#include "storage/dcp_file_names.h"
#include "storage/per_rank_metadata.h"

#include <dcpp/core/checkpoint_error.h>

#include <sys/stat.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

namespace dcpp {

namespace {

namespace fs = std::filesystem;

constexpr const char* kMetadataFile = detail::kMetadataFileName;

// Which file a path names, to tell whether a `.metadata` was replaced since set_up.
struct FileIdentity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  int64_t modified_ns = 0;
  int64_t size = 0;

  static FileIdentity of(const fs::path& path) {
    struct stat st {};
    FileIdentity identity;
    if (::stat(path.c_str(), &st) != 0) return identity;
    identity.exists = true;
    identity.device = st.st_dev;
    identity.inode = st.st_ino;
    identity.modified_ns =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    identity.size = static_cast<int64_t>(st.st_size);
    return identity;
  }
  bool operator==(const FileIdentity& other) const {
    return exists == other.exists && device == other.device && inode == other.inode &&
           modified_ns == other.modified_ns && size == other.size;
  }
};

}  // namespace

// Hidden: as a nested class of an exported class, its members would otherwise be exported too.
class [[gnu::visibility("hidden")]] FileSystemWriter::Impl {
 public:
  Impl(fs::path directory, FileSystemWriterOptions options)
      : directory_(std::move(directory)), options_(options) {
    if (options_.thread_count < 1) {
      throw CheckpointError(ErrorKind::kUsage,
                            "FileSystemWriterOptions::thread_count must be at least 1, not " +
                                std::to_string(options_.thread_count));
    }
    if (options_.compression == Compression::kZstd &&
        (options_.compression_level < 1 || options_.compression_level > 19)) {
      throw CheckpointError(ErrorKind::kUsage,
                            "FileSystemWriterOptions::compression_level must be 1 to 19 for "
                            "zstd, not " +
                                std::to_string(options_.compression_level));
    }
  }

  void set_up(int rank, bool is_coordinator) {
    begin_save();
    local_rank_.reset();
    create_directory();
    if (is_coordinator) {
      lock_ = detail::SaveLock::acquire(directory_, detail::kSaveLockFileName,
                                        "directory " + directory_.string());
    }
    metadata_at_set_up_ = FileIdentity::of(directory_ / metadata_file());
    if (!options_.overwrite && holds_checkpoint()) {
      lock_.release();
      throw CheckpointError(ErrorKind::kUsage,
                            "directory " + directory_.string() +
                                " already holds a checkpoint; save to a new directory, or set "
                                "FileSystemWriterOptions::overwrite to replace it");
    }
  }

  void set_up_without_collectives(int rank) {
    if (rank < 0) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "a save without collectives needs this process's rank, not " + std::to_string(rank));
    }
    begin_save();
    local_rank_ = rank;
    create_directory();
    lock_ = detail::SaveLock::acquire(
        directory_, detail::rank_save_lock_file_name(rank),
        "rank " + std::to_string(rank) + "'s part of directory " + directory_.string());
    metadata_at_set_up_ = FileIdentity::of(directory_ / metadata_file());
    if (fs::exists(directory_ / kMetadataFile)) {
      lock_.release();
      throw CheckpointError(
          ErrorKind::kUsage,
          "directory " + directory_.string() +
              " holds a checkpoint saved with collectives (.metadata); a save without collectives "
              "cannot replace it (.metadata would still be loaded instead, and no rank may remove "
              "it before every rank has saved): save to a new directory, or delete this one first");
    }
    if (!options_.overwrite && fs::exists(directory_ / metadata_file())) {
      lock_.release();
      throw CheckpointError(ErrorKind::kUsage,
                            "directory " + directory_.string() + " already holds rank " +
                                std::to_string(rank) + "'s part of a checkpoint (" +
                                metadata_file() +
                                "); save to a new directory, or set "
                                "FileSystemWriterOptions::overwrite to replace it");
    }
  }

  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) {
    if (local_rank_) {
      const std::string tag =
          fs::exists(directory_ / metadata_file()) ? detail::random_tag(8) + "_" : "";
      for (SavePlan& plan : plans) {
        if (plan.storage_data.empty()) {
          plan.storage_data = detail::data_file_prefix(*local_rank_, tag);
        }
      }
      return plans;
    }
    detail::assign_file_prefixes(plans, holds_checkpoint() ? detail::random_tag(8) + "_" : "");
    return plans;
  }

  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) {
    return detail::write_data_files(
        plan, options_.single_file_per_rank, options_.thread_count,
        [&](const std::string& name, const std::vector<const WriteItem*>& items) {
          return write_file(name, items, planner);
        });
  }

  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) {
    if (!metadata.storage_meta) {
      metadata.storage_meta = StorageMeta{directory_.string(), detail::random_tag(8), "", {}};
    }
    const bool replacing =
        local_rank_ ? fs::exists(directory_ / metadata_file()) : holds_checkpoint();
    std::set<std::string> referenced;
    const std::string bytes = detail::encode_metadata_with_results(metadata, results, &referenced);
    if (options_.checksum_file) {
      write_checksum_file(bytes, results, replacing);
    }
    {
      created(metadata_temp_file());
      detail::File file(directory_ / metadata_temp_file(), detail::File::Mode::kCreateTruncate);
      file.write_all(bytes.data(), bytes.size());
      if (options_.sync_files) {
        file.sync();
      }
      file.close();
    }
    std::error_code error;
    fs::rename(directory_ / metadata_temp_file(), directory_ / metadata_file(), error);
    if (error) {
      throw CheckpointError(ErrorKind::kIo, "cannot commit checkpoint " + directory_.string() +
                                                ": renaming " + metadata_temp_file() + " to " +
                                                metadata_file() + " failed: " + error.message());
    }
    committed_ = true;
    if (options_.sync_files) {
      detail::sync_directory(directory_);
      sync_parents();
    }
    if (replacing) {
      remove_unreferenced_data_files(referenced);
    }
    end_save();
  }

  void abort_save() {
    std::vector<std::string> created;
    {
      const std::lock_guard<std::mutex> guard(created_mutex_);
      created.swap(created_);
    }
    if (!created.empty() && committed_) {
      detail::logger().warn(
          "the save into {} failed after its .metadata was committed: its data files stay (the "
          "checkpoint may be complete; `dcpp verify` tells)",
          directory_.string());
    } else if (!created.empty() &&
               !(FileIdentity::of(directory_ / metadata_file()) == metadata_at_set_up_)) {
      detail::logger().warn(
          "the save into {} failed, but {} changed since it began (the coordinator may have "
          "committed before failing): this rank's {} files of it stay",
          directory_.string(), metadata_file(), created.size());
    } else if (!created.empty()) {
      std::size_t removed = 0;
      for (const std::string& name : created) {
        std::error_code error;
        if (fs::remove(directory_ / name, error)) {
          ++removed;
        } else if (error) {
          detail::logger().warn("cannot remove {} of the failed save: {}",
                                (directory_ / name).string(), error.message());
        }
      }
      detail::logger().info(
          "the save into {} failed: removed the files this rank wrote for it ({})",
          directory_.string(), removed);
    }
    end_save();
  }

  const fs::path& directory() const { return directory_; }
  const FileSystemWriterOptions& options() const { return options_; }

 private:
  // This save's file names: DCP's, or rank r's own when saving without collectives.
  std::string metadata_file() const {
    return local_rank_ ? detail::rank_metadata_file_name(*local_rank_) : kMetadataFile;
  }
  std::string metadata_temp_file() const { return metadata_file() + ".tmp"; }
  std::string checksum_file() const {
    return local_rank_ ? detail::rank_checksum_file_name(*local_rank_) : detail::kChecksumFileName;
  }
  std::string checksum_temp_file() const { return checksum_file() + ".tmp"; }

  // A save starts: what an earlier one that never ended still held is given up.
  void begin_save() {
    end_save();
    committed_ = false;
    metadata_at_set_up_ = FileIdentity{};
  }

  // A save ended (committed, or aborted and cleaned up): its files are no longer this save's to
  // remove, and the directory is free for the next save.
  void end_save() {
    {
      const std::lock_guard<std::mutex> guard(created_mutex_);
      created_.clear();
    }
    lock_.release();
  }

  // Records a file this save is about to create, before it exists: a failed save removes it.
  // Called by the writing threads.
  void created(const std::string& name) {
    const std::lock_guard<std::mutex> guard(created_mutex_);
    created_.push_back(name);
  }

  // Creates the checkpoint directory and any missing ancestor, remembering the outermost one this
  // process found missing: finish() makes the new entries durable in their parents.
  void create_directory() {
    fs::path missing;
    std::error_code probe;
    for (fs::path p = directory_; !p.empty() && !fs::exists(p, probe); p = p.parent_path()) {
      missing = p;
      if (p == p.parent_path()) break;
    }
    outermost_created_ = missing;
    std::error_code error;
    fs::create_directories(directory_, error);
    if (error) {
      throw CheckpointError(ErrorKind::kIo, "cannot create checkpoint directory " +
                                                directory_.string() + ": " + error.message());
    }
  }

  // After the commit: the checkpoint directory's entry in its parent, and the entries of the
  // ancestors this process created, made durable (the directory itself may be new). Parents of
  // directories another rank created first are synced by the parent of the checkpoint directory
  // only; create the root beforehand where that matters.
  void sync_parents() const {
    const auto normal = [](const fs::path& path) {
      fs::path n = fs::absolute(path).lexically_normal();
      return n.has_filename() ? n : n.parent_path();  // "a/b/" is "a/b"
    };
    const fs::path absolute = normal(directory_);
    const fs::path outermost = outermost_created_.empty() ? absolute : normal(outermost_created_);
    for (fs::path child = absolute; child.has_parent_path() && child != child.parent_path();
         child = child.parent_path()) {
      detail::sync_directory(child.parent_path());
      if (child == outermost) break;
    }
  }

  // A `.metadata`, or a per-rank checkpoint's `__0.metadata`, as DCP looks for one.
  bool holds_checkpoint() const {
    return fs::exists(directory_ / kMetadataFile) ||
           !detail::find_rank_metadata_files(directory_).empty();
  }

  std::vector<WriteResult> write_file(
      const std::string& name, const std::vector<const WriteItem*>& items, SavePlanner& planner) {
    created(name);
    detail::File file(directory_ / name, detail::File::Mode::kCreateTruncate);
    detail::FileSink sink(file);
    std::vector<WriteResult> results = detail::write_data_file(
        sink, name, items, planner, options_.compression, options_.compression_level);
    sink.flush();
    if (options_.sync_files) {
      file.sync();
    }
    file.close();
    return results;
  }

  // Commits the checksum file of the save whose `.metadata` will be `metadata_bytes`, before that
  // `.metadata` is written. A replacing save keeps the entry of the `.metadata` it replaces.
  void write_checksum_file(const std::string& metadata_bytes,
                           const std::vector<std::vector<WriteResult>>& results, bool replacing) {
    const std::string bytes = detail::checksum_file_of(metadata_bytes, results,
                                                       replacing ? replaced_save() : std::nullopt);
    created(checksum_temp_file());
    detail::File file(directory_ / checksum_temp_file(), detail::File::Mode::kCreateTruncate);
    file.write_all(bytes.data(), bytes.size());
    if (options_.sync_files) {
      file.sync();
    }
    file.close();
    std::error_code error;
    fs::rename(directory_ / checksum_temp_file(), directory_ / checksum_file(), error);
    if (error) {
      throw CheckpointError(ErrorKind::kIo, "cannot commit checkpoint " + directory_.string() +
                                                ": renaming " + checksum_temp_file() + " to " +
                                                checksum_file() + " failed: " + error.message());
    }
    if (options_.sync_files) {
      // Durable before `.metadata` is renamed: a `.metadata` never outlives its checksums.
      detail::sync_directory(directory_);
    }
  }

  // The checksums of the checkpoint a replacing save replaces: its `.metadata`'s, and its items'
  // when its checksum file has them. None when its `.metadata` cannot be read (or is none: a
  // collective save replacing a per-rank checkpoint).
  std::optional<detail::SaveChecksums> replaced_save() const {
    std::string metadata;
    try {
      if (!fs::exists(directory_ / metadata_file())) return std::nullopt;
      const detail::File file(directory_ / metadata_file(), detail::File::Mode::kRead);
      metadata.resize(file.size());
      file.read_exactly(0, metadata.data(), metadata.size());
    } catch (const CheckpointError& error) {
      detail::logger().warn("cannot read the .metadata being replaced: {}", error.what());
      return std::nullopt;
    }
    std::optional<std::string> checksums;
    const fs::path path = directory_ / checksum_file();
    try {
      if (fs::exists(path)) {
        const detail::File file(path, detail::File::Mode::kRead);
        checksums.emplace(file.size(), '\0');
        file.read_exactly(0, checksums->data(), checksums->size());
      }
    } catch (const CheckpointError& error) {
      detail::logger().warn("the checksum file being replaced is unreadable: {}", error.what());
    }
    return detail::replaced_save_checksums(metadata, checksums, path.string());
  }

  // After a replacing commit: the data files of the previous checkpoint (DCP's `__*.distcp`
  // names only; without collectives only this rank's `__<r>_*.distcp`), and after a collective
  // save the per-rank metadata and checksum files of a per-rank checkpoint it replaced; nothing
  // else in the directory is touched.
  void remove_unreferenced_data_files(const std::set<std::string>& referenced) {
    const std::string prefix = local_rank_ ? detail::data_file_prefix(*local_rank_) : "__";
    std::vector<std::string> stale;
    if (!local_rank_) {
      for (const int rank : detail::find_rank_metadata_files(directory_)) {
        stale.push_back(detail::rank_metadata_file_name(rank));
        stale.push_back(detail::rank_checksum_file_name(rank));
      }
    }
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(directory_, error)) {
      const std::string name = entry.path().filename().string();
      const bool is_data_file = name.rfind(prefix, 0) == 0 && detail::is_data_file_name(name);
      if ((is_data_file && referenced.count(name) == 0) ||
          std::find(stale.begin(), stale.end(), name) != stale.end()) {
        std::error_code failed;
        fs::remove(entry.path(), failed);
        if (failed) {
          detail::logger().warn("cannot remove old data file {}: {}", entry.path().string(),
                                failed.message());
        }
      }
    }
  }

  fs::path directory_;
  fs::path outermost_created_;  // the outermost directory create_directory() found missing
  FileSystemWriterOptions options_;
  std::optional<int> local_rank_;  // set while saving without collectives
  // The save in progress (set_up to finish or abort_save).
  detail::SaveLock lock_;             // the coordinator's (each rank's without collectives)
  std::mutex created_mutex_;          // guards created_, which the writing threads extend
  std::vector<std::string> created_;  // the files this rank created for it
  bool committed_ = false;            // this writer renamed its `.metadata` into place
  FileIdentity metadata_at_set_up_;   // what `.metadata` (or `__<r>.metadata`) was at set_up
};

FileSystemWriter::FileSystemWriter(std::filesystem::path directory, FileSystemWriterOptions options)
    : impl_(std::make_unique<Impl>(std::move(directory), options)) {}
FileSystemWriter::~FileSystemWriter() = default;

void FileSystemWriter::set_up(int rank, bool is_coordinator) {
  impl_->set_up(rank, is_coordinator);
}

void FileSystemWriter::set_up_without_collectives(int rank) {
  impl_->set_up_without_collectives(rank);
}

std::vector<SavePlan> FileSystemWriter::prepare_global_plan(std::vector<SavePlan> plans) {
  return impl_->prepare_global_plan(std::move(plans));
}

std::vector<WriteResult> FileSystemWriter::write_data(const SavePlan& plan, SavePlanner& planner) {
  return impl_->write_data(plan, planner);
}

void FileSystemWriter::finish(Metadata metadata,
                              const std::vector<std::vector<WriteResult>>& results) {
  impl_->finish(std::move(metadata), results);
}

void FileSystemWriter::abort_save() { impl_->abort_save(); }

const std::filesystem::path& FileSystemWriter::directory() const { return impl_->directory(); }
const FileSystemWriterOptions& FileSystemWriter::options() const { return impl_->options(); }

}  // namespace dcpp
