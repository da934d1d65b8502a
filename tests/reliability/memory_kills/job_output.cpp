#include "job_output.h"

#include <regex>

namespace memory_kills {

void JobOutput::take(const std::string& line, Clock::time_point when) {
  static const std::regex step(R"(\[rank 0\] step (\d+) loss (\S+))");
  static const std::regex trains(R"(\[rank \d+\] rank (\d+) trains from step (\d+))");
  static const std::regex resumed(R"(\[rank \d+\] rank (\d+) resumed from '([^']*)' at step \d+)");
  static const std::regex hash(R"(\[rank 0\] parameters fnv1a64 ([0-9a-f]+))");
  static const std::regex finished(R"(\[rank 0\] finished at step (\d+))");
  std::smatch m;
  if (std::regex_match(line, m, step)) {
    const long long n = std::stoll(m[1].str());
    losses_[n] = m[2].str();
    step_at_[n] = when;
  } else if (std::regex_match(line, m, trains)) {
    trains_from_[std::stoi(m[1].str())] = std::stoll(m[2].str());
    last_trains_from_at_ = when;
  } else if (std::regex_match(line, m, resumed)) {
    resumed_from_[std::stoi(m[1].str())] = m[2].str();
  } else if (std::regex_match(line, m, hash)) {
    parameters_hash_ = m[1].str();
  } else if (std::regex_match(line, m, finished)) {
    finished_at_ = std::stoll(m[1].str());
  }
}

std::optional<long long> JobOutput::newest_step() const {
  if (losses_.empty()) return std::nullopt;
  return losses_.rbegin()->first;
}

std::optional<JobOutput::Clock::time_point> JobOutput::step_at(long long step) const {
  auto it = step_at_.find(step);
  if (it == step_at_.end()) return std::nullopt;
  return it->second;
}

std::optional<JobOutput::Clock::time_point> JobOutput::training_since(int ranks) const {
  if (static_cast<int>(trains_from_.size()) < ranks) return std::nullopt;
  return last_trains_from_at_;
}

}  // namespace memory_kills
