// The manager's phase log as the crash driver reads it: every phase of a save, a prune and a load
// has a begin record before its end record, and PhaseWatch follows them.

#include "phase_watch.h"

#include "dcpp_test.h"

#include <dcpp/dcpp.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <tuple>

namespace {

using Key = std::tuple<std::string, std::string, long long>;

dcpp::StateDict state_of(const at::Tensor& weight) {
  dcpp::StateDict state;
  state.insert("w", weight);
  return state;
}

}  // namespace

TEST_CASE("every phase of async saves, pruning and a load logs a begin before its end") {
  dcpp::test::TempDir dir;
  const auto metrics = dir / "metrics.jsonl";
  crash::PhaseWatch watch(metrics);
  at::Tensor weight = at::arange(1000, at::kFloat);
  {
    auto options = dcpp::CheckpointManagerOptions()
                       .with_root(dir / "ckpt")
                       .with_retention(dcpp::RetentionPolicy().with_keep_latest(1))
                       .with_metrics_file(metrics);
    options.stager = dcpp::make_tbb_stager();
    dcpp::CheckpointManager manager(options);
    for (int64_t step = 1; step <= 3; ++step) {
      weight.add_(1);
      dcpp::SaveRequest request;
      request.step = step;
      manager.save(state_of(weight), request).staged.wait();
    }
    manager.wait();
    dcpp::StateDict target = state_of(at::zeros({1000}));
    REQUIRE(manager.restore(target));
    CHECK(at::equal(target.at("w").tensor(), weight));
  }

  // The file, line by line: each begin once, before its end.
  std::map<Key, int> begun, ended;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    const Key key{j.at("operation").get<std::string>(), j.at("phase").get<std::string>(),
                  j.at("step").get<long long>()};
    if (j.at("event") == "begin") {
      CHECK(ended.count(key) == 0);
      begun[key] += 1;
    } else {
      REQUIRE(j.at("event") == "end");
      CHECK(begun[key] == 1);
      ended[key] += 1;
    }
  }
  for (long long step = 1; step <= 3; ++step) {
    for (const char* phase : {"plan", "stage", "write", "commit"}) {
      INFO("save " << phase << " of step " << step);
      CHECK(begun[Key{"save", phase, step}] == 1);
      CHECK(ended[Key{"save", phase, step}] == 1);
    }
  }
  CHECK(ended[Key{"prune", "delete", 1}] == 1);
  CHECK(ended[Key{"prune", "delete", 2}] == 1);
  CHECK(ended[Key{"load", "plan", 3}] == 1);
  CHECK(ended[Key{"load", "read", 3}] == 1);
  CHECK((begun == ended));

  // The driver's view: all of it read, nothing open.
  const std::vector<crash::PhaseEvent> events = watch.read_new();
  CHECK(events.size() == 2 * ended.size());
  CHECK(watch.open().empty());
  CHECK((watch.open_phases() == std::set<crash::Phase>{crash::Phase::kTraining}));
}

TEST_CASE("a begin without its end is an open phase, as a kill leaves it") {
  dcpp::test::TempDir dir;
  const auto metrics = dir / "metrics.jsonl";
  crash::PhaseWatch watch(metrics);
  dcpp::test::write_file(
      metrics,
      R"({"event":"begin","operation":"save","phase":"write","step":8,"rank":0,"path":"x","time":1})"
      "\n"
      R"({"event":"begin","operation":"prune","phase":"delete","step":4,"rank":0,"path":"y","time":2})"
      "\n"
      R"({"event":"end","operation":"prune","phase":"delete","step":4,"rank":0,"path":"y","time":3,)"
      R"("bytes":0,"seconds":0.5,"gb_per_s":0})"
      "\n"
      R"({"event":"begin","operation":"save","phase":"commit","step":8)");  // no newline yet
  watch.read_new();
  CHECK((watch.open_phases() == std::set<crash::Phase>{crash::Phase::kWriting}));
  std::ofstream(metrics, std::ios::app) << R"(,"rank":0,"path":"z","time":4})"
                                        << "\n";
  watch.read_new();
  CHECK((watch.open_phases() ==
         std::set<crash::Phase>{crash::Phase::kWriting, crash::Phase::kCommit}));
}
