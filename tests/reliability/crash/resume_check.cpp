#include "resume_check.h"

#include <regex>

namespace crash {

void ResumeReport::take(const std::string& line) {
  static const std::regex resume(R"(\[rank \d+\] RESUME rank (\d+) (.*))");
  std::smatch m;
  if (std::regex_match(line, m, resume)) {
    lines[std::stoi(m[1].str())] = m[2].str();
  } else if (line.find("MISMATCH") != std::string::npos) {
    mismatches.push_back(line);
  }
}

void check_resume(const ResumeReport& report, int ranks, std::optional<long long> latest,
                  const std::string& run, Trial& trial) {
  for (const auto& m : report.mismatches) trial.fail(run + ": " + m);
  const std::string expected = latest ? "step " + std::to_string(*latest) + " verified" : "none";
  for (int r = 0; r < ranks; ++r) {
    auto it = report.lines.find(r);
    if (it == report.lines.end()) {
      trial.fail(run + ": rank " + std::to_string(r) + " reported no resume");
    } else if (it->second.rfind(expected, 0) != 0) {
      trial.fail(run + ": rank " + std::to_string(r) + " resumed '" + it->second + "', expected '" +
                 expected + "' (the latest complete checkpoint on disk)");
    }
  }
}

}  // namespace crash
