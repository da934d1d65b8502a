#include "verify/verify_manager_root.h"

#include "common/manager_root.h"
#include "verify/verify_command.h"

#include <set>
#include <string>

namespace dcpp::tools {

using nlohmann::json;
namespace fs = std::filesystem;

json verify_manager_root(const fs::path& root, std::optional<int64_t> step) {
  const json listing = inspect_manager_root(root);
  json report = {{"ok", false},
                 {"format", "dcpp-manager-root"},
                 {"root", root.string()},
                 {"checkpoints", json::array()},
                 {"skipped", json::array()},
                 {"problem", nullptr}};
  bool all_ok = true;
  std::set<int64_t> committed_steps;
  for (const json& entry : listing["checkpoints"]) {
    const int64_t entry_step = entry["step"].get<int64_t>();
    if (!entry["committed"].get<bool>()) {
      if (!step || *step == entry_step) {
        report["skipped"].push_back(
            {{"directory", entry["directory"]}, {"step", entry_step}, {"state", entry["state"]}});
      }
      continue;
    }
    committed_steps.insert(entry_step);
    if (step && *step != entry_step) continue;
    json verification = verify_checkpoint(root / entry["directory"].get<std::string>());
    all_ok = all_ok && verification["ok"].get<bool>();
    report["checkpoints"].push_back({{"directory", entry["directory"]},
                                     {"step", entry_step},
                                     {"kind", entry["kind"]},
                                     {"report", std::move(verification)}});
  }
  if (report["checkpoints"].empty()) {
    std::string steps;
    for (const int64_t committed : committed_steps) {
      steps += (steps.empty() ? "" : ", ") + std::to_string(committed);
    }
    report["problem"] =
        steps.empty() ? "no committed checkpoint under this CheckpointManager root: nothing a "
                        "resume would load"
                      : "no committed checkpoint of step " + std::to_string(*step) +
                            " under this CheckpointManager root; its committed steps: " + steps;
    return report;
  }
  report["ok"] = all_ok;
  return report;
}

void print_manager_root_verification(const json& report, std::ostream& out) {
  std::string failed;
  for (const json& checkpoint : report["checkpoints"]) {
    const std::string directory = checkpoint["directory"].get<std::string>();
    out << "== " << directory << " (step " << checkpoint["step"].get<int64_t>() << ", "
        << checkpoint["kind"].get<std::string>() << ")\n";
    print_verification(checkpoint["report"], out);
    if (!checkpoint["report"]["ok"].get<bool>()) {
      failed += (failed.empty() ? "" : ", ") + directory;
    }
  }
  for (const json& skipped : report["skipped"]) {
    out << "skipped: " << skipped["directory"].get<std::string>() << " ("
        << skipped["state"].get<std::string>() << ": not committed, no resume loads it)\n";
  }
  const std::string root = report["root"].get<std::string>();
  if (!report["problem"].is_null()) {
    out << "failed: " << root << ": " << report["problem"].get<std::string>() << "\n";
    return;
  }
  const std::size_t count = report["checkpoints"].size();
  const std::string checkpoints =
      std::to_string(count) + (count == 1 ? " committed checkpoint" : " committed checkpoints");
  if (failed.empty()) {
    out << "ok: " << root << ": " << checkpoints << " verified\n";
  } else {
    out << "failed: " << root << ": problems in " << failed << " (of " << checkpoints << ")\n";
  }
}

}  // namespace dcpp::tools
