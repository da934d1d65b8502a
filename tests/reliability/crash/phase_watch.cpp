#include "phase_watch.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace crash {
namespace fs = std::filesystem;

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kStaging:
      return "staging";
    case Phase::kWriting:
      return "writing";
    case Phase::kCommit:
      return "commit";
    case Phase::kPruning:
      return "pruning";
    case Phase::kLoading:
      return "loading";
    case Phase::kStartup:
      return "startup";
    case Phase::kTraining:
      return "training";
  }
  return "?";
}

const std::vector<Phase>& all_phases() {
  static const std::vector<Phase> phases{Phase::kStaging, Phase::kWriting, Phase::kCommit,
                                         Phase::kPruning, Phase::kLoading, Phase::kStartup,
                                         Phase::kTraining};
  return phases;
}

Phase phase_of(const PhaseEvent& event) {
  if (event.operation == "prune") return Phase::kPruning;
  if (event.operation == "load") return Phase::kLoading;
  if (event.phase == "plan" || event.phase == "stage") return Phase::kStaging;
  if (event.phase == "write") return Phase::kWriting;
  if (event.phase == "commit") return Phase::kCommit;
  return Phase::kTraining;
}

PhaseWatch::PhaseWatch(fs::path file) : file_(std::move(file)) {
  inotify_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ < 0) throw std::runtime_error(std::string("inotify: ") + std::strerror(errno));
  if (::inotify_add_watch(inotify_, file_.parent_path().c_str(), IN_MODIFY | IN_CREATE) < 0) {
    throw std::runtime_error("inotify watch of '" + file_.parent_path().string() +
                             "': " + std::strerror(errno));
  }
  std::error_code ec;
  const auto size = fs::file_size(file_, ec);
  offset_ = ec ? 0 : static_cast<long long>(size);
}

PhaseWatch::~PhaseWatch() {
  if (inotify_ >= 0) ::close(inotify_);
}

std::vector<PhaseEvent> PhaseWatch::read_new() {
  char events[4096];
  while (::read(inotify_, events, sizeof(events)) > 0) {
  }
  std::vector<PhaseEvent> out;
  const int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof(buffer), offset_);
    if (n <= 0) break;
    pending_.append(buffer, static_cast<size_t>(n));
    offset_ += n;
  }
  ::close(fd);
  size_t start = 0;
  for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    try {
      const auto j = nlohmann::json::parse(pending_.substr(start, end - start));
      PhaseEvent e;
      e.begin = j.value("event", std::string("end")) == "begin";
      e.operation = j.at("operation").get<std::string>();
      e.phase = j.at("phase").get<std::string>();
      e.step = j.at("step").get<long long>();
      e.seconds = j.value("seconds", 0.0);
      const auto key = std::make_tuple(e.operation, e.phase, e.step);
      if (e.begin) {
        open_.insert(key);
      } else {
        open_.erase(key);
      }
      out.push_back(std::move(e));
    } catch (const nlohmann::json::exception& error) {
      throw std::runtime_error("the phase log '" + file_.string() + "' has a malformed line (" +
                               error.what() + "): " + pending_.substr(start, end - start));
    }
  }
  pending_.erase(0, start);
  return out;
}

std::set<Phase> PhaseWatch::open_phases() const {
  std::set<Phase> phases;
  for (const auto& [operation, phase, step] : open_) {
    PhaseEvent e;
    e.operation = operation;
    e.phase = phase;
    phases.insert(phase_of(e));
  }
  if (phases.empty()) phases.insert(Phase::kTraining);
  return phases;
}

std::pair<std::string, std::string> trigger_of(Phase phase) {
  switch (phase) {
    case Phase::kStaging:
      return {"save", "stage"};
    case Phase::kWriting:
      return {"save", "write"};
    case Phase::kCommit:
      return {"save", "commit"};
    case Phase::kPruning:
      return {"prune", "delete"};
    case Phase::kLoading:
      return {"load", "read"};
    case Phase::kStartup:
    case Phase::kTraining:
      break;
  }
  return {"", ""};
}

void PhaseDurations::add(const PhaseEvent& event) {
  if (!event.begin) seconds_[{event.operation, event.phase}].push_back(event.seconds);
}

double PhaseDurations::median(const std::pair<std::string, std::string>& logged,
                              double fallback) const {
  auto it = seconds_.find(logged);
  if (it == seconds_.end() || it->second.empty()) return fallback;
  std::vector<double> v = it->second;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace crash
