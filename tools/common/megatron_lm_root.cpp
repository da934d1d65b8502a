#include "common/megatron_lm_root.h"

#include "plugin/megatron_tracker.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/storage/megatron_storage.h>

#include <algorithm>
#include <cctype>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;

// `iter_` and 7 to 18 digits, as Megatron-LM's get_checkpoint_name writes `iter_{:07d}`.
bool is_iteration_name(const std::string& name) {
  const std::string digits = name.rfind("iter_", 0) == 0 ? name.substr(5) : "";
  return digits.size() >= 7 && digits.size() <= 18 &&
         std::all_of(digits.begin(), digits.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

nlohmann::json MegatronLmCheckpoint::to_json(const fs::path& root) const {
  return {{"root", root.string()},
          {"directory", directory.filename().string()},
          {"iteration", iteration ? nlohmann::json(*iteration) : nlohmann::json(nullptr)},
          {"chosen_by", chosen_by}};
}

bool is_megatron_lm_root(const fs::path& directory) {
  std::error_code error;
  if (!fs::is_directory(directory, error) || fs::exists(directory / ".metadata", error) ||
      fs::exists(directory / "__0.metadata", error) ||
      fs::exists(directory / kMegatronConfigFile, error)) {
    return false;
  }
  if (fs::is_regular_file(directory / kMegatronTrackerFile, error)) return true;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    if (it->is_directory(error) && is_iteration_name(it->path().filename().string())) return true;
  }
  return false;
}

MegatronLmCheckpoint megatron_lm_checkpoint(const fs::path& root, std::optional<int64_t> step) {
  const std::vector<CheckpointInfo> complete = list_checkpoints(root);
  std::string iterations;
  for (const CheckpointInfo& info : complete) {
    iterations += (iterations.empty() ? "" : ", ") + std::to_string(info.step);
  }
  const std::string there = iterations.empty()
                                ? "it holds no complete iteration"
                                : "its complete iterations are " + iterations +
                                      " (name one with --step, or give its iter_NNNNNNN directory)";
  const fs::path tracker_path = detail::megatron_tracker_path(root);
  MegatronLmCheckpoint chosen;
  if (step) {
    chosen.iteration = *step;
    chosen.chosen_by = "--step";
  } else if (const auto tracker = detail::read_megatron_tracker(root)) {
    chosen.chosen_by = "tracker";
    if (tracker->release) {
      chosen.directory = root / "release";
      if (!fs::exists(chosen.directory / ".metadata")) {
        throw CheckpointError(ErrorKind::kNotFound, tracker_path.string() +
                                                        " says 'release', but " +
                                                        chosen.directory.string() +
                                                        " is no complete checkpoint; " + there);
      }
      return chosen;
    }
    if (!tracker->iteration) {
      throw CheckpointError(ErrorKind::kCorrupt, tracker_path.string() + ": " + tracker->problem +
                                                     ", as Megatron-LM's read_metadata reads "
                                                     "it; " +
                                                     there);
    }
    chosen.iteration = tracker->iteration;
  } else if (!complete.empty()) {
    chosen.iteration = complete.back().step;
    chosen.chosen_by = "newest";
  } else {
    throw CheckpointError(ErrorKind::kNotFound, root.string() +
                                                    " is a Megatron-LM save directory without "
                                                    "latest_checkpointed_iteration.txt, and " +
                                                    there);
  }
  const auto found = std::find_if(complete.begin(), complete.end(), [&](const CheckpointInfo& c) {
    return c.step == *chosen.iteration;
  });
  if (found == complete.end()) {
    const std::string by = chosen.chosen_by == "--step"
                               ? "--step names iteration "
                               : tracker_path.string() + " names iteration ";
    throw CheckpointError(ErrorKind::kNotFound,
                          by + std::to_string(*chosen.iteration) + ", but " + root.string() +
                              " holds no complete checkpoint of it; " + there);
  }
  chosen.directory = found->path;
  return chosen;
}

}  // namespace dcpp::tools
