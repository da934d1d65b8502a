#include "common/manager_root.h"

#include "common/progress_bar.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/checkpoint_kind.h>
#include <dcpp/storage/huggingface_storage.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <iomanip>
#include <optional>
#include <sstream>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The manifest (docs/plugin.md; plugin/src/checkpoint_info_json.h names it for the plugin).
constexpr const char* kManifestFile = "dcpp_checkpoint.json";

struct StepName {
  int64_t step = 0;
  bool is_export = false;
  std::string suffix;  // "", "incomplete" or "deleting"
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `[export-]step-<8+ digits>[.incomplete|.deleting]`, as the manager names its directories.
std::optional<StepName> parse_step_name(std::string name) {
  StepName parsed;
  for (const std::string suffix : {"incomplete", "deleting"}) {
    if (ends_with(name, "." + suffix)) {
      parsed.suffix = suffix;
      name.resize(name.size() - suffix.size() - 1);
    }
  }
  if (name.rfind("export-", 0) == 0) {
    parsed.is_export = true;
    name.erase(0, 7);
  }
  if (name.rfind("step-", 0) != 0) return std::nullopt;
  const std::string digits = name.substr(5);
  if (digits.size() < 8 || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return std::nullopt;
  }
  parsed.step = std::stoll(digits);
  return parsed;
}

uint64_t size_on_disk(const fs::path& directory) {
  uint64_t size = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) {
      const uint64_t file_size = it->file_size(size_error);
      if (!size_error) size += file_size;
    }
  }
  return size;
}

json describe(const fs::path& directory, const StepName& name) {
  json entry{{"directory", directory.filename().string()},
             {"step", name.step},
             {"kind", to_string(name.is_export ? CheckpointKind::kExport : CheckpointKind::kFull)},
             {"epoch", nullptr},
             {"committed_at", nullptr},
             {"metrics", nullptr},
             {"size", size_on_disk(directory)}};
  std::error_code error;
  bool has_manifest = false;
  if (fs::exists(directory / kManifestFile, error)) {
    try {
      const CheckpointInfo info = read_checkpoint_info(directory);
      entry["step"] = info.step;
      entry["kind"] = to_string(info.kind);
      entry["epoch"] = info.epoch;
      entry["committed_at"] = info.committed_at;
      entry["metrics"] = info.metrics;
      has_manifest = true;
    } catch (const CheckpointError& e) {
      entry["problem"] = e.what();
    }
  }
  // As the manager decides (list_checkpoints): the final name, `.metadata` and the manifest.
  const bool committed =
      name.suffix.empty() && has_manifest && fs::exists(directory / ".metadata", error);
  entry["committed"] = committed;
  entry["state"] = committed ? "committed" : name.suffix.empty() ? "incomplete" : name.suffix;
  return entry;
}

std::string utc_time(double seconds) {
  const std::time_t time = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&time, &utc);
  std::ostringstream out;
  out << std::put_time(&utc, "%Y-%m-%d %H:%M:%S") << " UTC";
  return out.str();
}

// "accuracy=0.875 loss=0.25", or "-".
std::string metrics_text(const json& metrics) {
  if (!metrics.is_object() || metrics.empty()) return "-";
  std::ostringstream out;
  const char* separator = "";
  for (const auto& [name, value] : metrics.items()) {
    out << separator << name << "=";
    if (value.is_number()) {
      out << value.get<double>();
    } else {
      out << value.dump();  // null: a NaN or an infinity in the manifest
    }
    separator = " ";
  }
  return out.str();
}

}  // namespace

bool is_manager_root(const fs::path& directory) {
  std::error_code error;
  if (!fs::is_directory(directory, error) || fs::exists(directory / ".metadata", error) ||
      fs::exists(directory / "__0.metadata", error) || is_huggingface_directory(directory)) {
    return false;
  }
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    if (it->is_directory(error) && parse_step_name(it->path().filename().string())) return true;
  }
  return false;
}

json inspect_manager_root(const fs::path& root) {
  std::vector<json> checkpoints;
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    if (!entry.is_directory()) continue;
    if (const auto name = parse_step_name(entry.path().filename().string())) {
      checkpoints.push_back(describe(entry.path(), *name));
    }
  }
  std::sort(checkpoints.begin(), checkpoints.end(), [](const json& a, const json& b) {
    const auto key = [](const json& c) {
      return std::make_tuple(c["step"].get<int64_t>(),
                             c["kind"] != to_string(CheckpointKind::kFull),
                             c["directory"].get<std::string>());
    };
    return key(a) < key(b);
  });
  return json{
      {"format", "dcpp-manager-root"}, {"root", root.string()}, {"checkpoints", checkpoints}};
}

fs::path example_step_directory(const json& listing) {
  const fs::path root = listing["root"].get<std::string>();
  const json& checkpoints = listing["checkpoints"];
  if (checkpoints.empty()) return root;
  std::string directory = checkpoints.back()["directory"];
  for (const json& c : checkpoints) {
    if (c["committed"].get<bool>() && c["kind"] == to_string(CheckpointKind::kFull))
      directory = c["directory"];
  }
  return root / directory;
}

void print_manager_root(const json& listing, std::ostream& out) {
  const json& checkpoints = listing["checkpoints"];
  std::size_t committed = 0;
  for (const json& c : checkpoints) committed += c["committed"].get<bool>() ? 1 : 0;
  out << "manager root " << listing["root"].get<std::string>() << ": " << checkpoints.size()
      << " checkpoint directories, " << committed << " committed\n";
  std::size_t width = 9;
  for (const json& c : checkpoints)
    width = std::max(width, c["directory"].get<std::string>().size());
  const int name_width = static_cast<int>(width) + 2;
  out << std::left << std::setw(name_width) << "directory" << std::setw(10) << "step"
      << std::setw(12) << "state" << std::setw(8) << "kind" << std::setw(25) << "committed at"
      << std::setw(11) << "size"
      << "metrics\n";
  for (const json& c : checkpoints) {
    out << std::left << std::setw(name_width) << c["directory"].get<std::string>() << std::setw(10)
        << c["step"].get<int64_t>() << std::setw(12) << c["state"].get<std::string>()
        << std::setw(8) << c["kind"].get<std::string>() << std::setw(25)
        << (c["committed_at"].is_null() ? std::string("-")
                                        : utc_time(c["committed_at"].get<double>()))
        << std::setw(11) << human_bytes(c["size"].get<uint64_t>()) << metrics_text(c["metrics"]);
    if (c.contains("problem")) out << "  (" << c["problem"].get<std::string>() << ")";
    out << "\n";
  }
}

}  // namespace dcpp::tools
