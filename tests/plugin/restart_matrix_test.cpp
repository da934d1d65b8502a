// The restart matrix (docs/reliability.md, "Restarts under store faults"): a job restarts while
// the store is {healthy, answering 500 to reads, stalled, refusing connections, or its STS
// stalled} x {its local root empty, or holding older steps than the store} x {1 rank, 2 ranks}.
// In every cell every rank ends alike, within the restart timeout: it resumes the store's newest
// step, or the local root's newest when the store cannot be read (a fork), or fails naming the
// store; never from scratch while the store holds a step, and the store's steps are untouched.

#include "dcpp_test.h"
#include "manager_test_support.h"
#include "rank_threads.h"
#include "storage/aws_environment.h"
#include "storage/s3_test_server.h"

#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/storage/s3_prefix.h>

#include <chrono>
#include <memory>
#include <mutex>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::S3Fault;
using dcpp::test::S3TestServer;
using dcpp::test::TempDir;

namespace {

enum class StoreFault { kHealthy, kErrsOnReads, kStalled, kRefused, kStsStalled };
enum class LocalRoot { kEmpty, kOlderSteps };

const char* name_of(StoreFault store) {
  switch (store) {
    case StoreFault::kHealthy:
      return "healthy";
    case StoreFault::kErrsOnReads:
      return "500 on reads";
    case StoreFault::kStalled:
      return "stalled";
    case StoreFault::kRefused:
      return "refused";
    case StoreFault::kStsStalled:
      return "STS stalled";
  }
  return "?";
}

dcpp::StateDict matrix_state(int64_t step, int rank) {
  dcpp::StateDict state;
  state.insert("w" + std::to_string(rank),
               at::arange(1024, at::kDouble) + static_cast<double>(1000 * step + rank));
  state.insert("step", step);
  return state;
}

// How one rank's restart ended: the step it resumed bit for bit (-1: nothing), or its error.
struct RestartOutcome {
  int64_t step = -1;
  bool bit_for_bit = true;
  std::string error;
  bool operator==(const RestartOutcome& other) const {
    return step == other.step && bit_for_bit == other.bit_for_bit && error == other.error;
  }
};

struct MatrixCell {
  StoreFault store;
  LocalRoot local;
  int ranks;
};

class Matrix {
 public:
  explicit Matrix(const MatrixCell& cell) : cell_(cell) { server_.clear_faults(); }
  ~Matrix() { server_.clear_faults(); }

  dcpp::CheckpointManagerOptions options(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         const fs::path& root, const dcpp::S3Options& s3) const {
    dcpp::CheckpointManagerOptions o =
        dcpp::CheckpointManagerOptions().with_root(root).with_async(false);
    o.remote = dcpp::RemoteTierOptions().with_url(url_).with_s3(s3).with_restart_timeout(
        std::chrono::seconds(3));
    if (cell_.ranks > 1) {
      o.with_process_group(dcpp::test::loopback_group(store, rank, cell_.ranks, "matrix"));
    }
    return o;
  }

  // Steps 1 to 3, drained; the roots of the ranks hold steps 1 and 2 (kOlderSteps) or nothing.
  void prepare() {
    const fs::path first = dir_ / "first";
    dcpp::test::on_rank_threads(cell_.ranks, [&](int rank, const auto& store) {
      dcpp::CheckpointManager manager(options(store, rank, first, server_.options()));
      for (int64_t step = 1; step <= 3; ++step)
        manager.save(matrix_state(step, rank), request(step));
      manager.wait_for_remote();
    });
    if (cell_.local == LocalRoot::kOlderSteps) {
      fs::copy(first, root_, fs::copy_options::recursive);
      fs::remove_all(root_ / dcpp::step_directory_name(3));
    }
    objects_before_ = remote_objects();
  }

  // Restarts every rank with the store failing as the cell says.
  std::vector<RestartOutcome> restart() {
    dcpp::S3Options s3 = server_.options();
    std::optional<dcpp::test::ScopedAwsEnvironment> environment;
    S3Fault fault;
    fault.times = 1000000;
    switch (cell_.store) {
      case StoreFault::kHealthy:
        break;
      case StoreFault::kErrsOnReads:
        fault.method = "GET";
        fault.status = 500;
        server_.inject(fault);
        break;
      case StoreFault::kStalled:
        fault.stall = true;
        server_.inject(fault);
        break;
      case StoreFault::kRefused:
        s3.endpoint_url = "http://127.0.0.1:" + std::to_string(dcpp::test::free_loopback_port());
        break;
      case StoreFault::kStsStalled:
        environment.emplace();
        environment->use_web_identity(server_.credentials_endpoint() + "/sts");
        s3.access_key_id.clear();
        s3.secret_access_key.clear();
        s3.session_token.clear();
        fault.path_contains = "__dcpp_credentials/sts";
        fault.stall = true;
        server_.inject(fault);
        break;
    }
    std::vector<RestartOutcome> outcomes(cell_.ranks);
    std::vector<std::unique_ptr<dcpp::CheckpointManager>> managers(cell_.ranks);
    dcpp::test::on_rank_threads(cell_.ranks, [&](int rank, const auto& store) {
      RestartOutcome& outcome = outcomes[rank];
      try {
        managers[rank] = std::make_unique<dcpp::CheckpointManager>(options(store, rank, root_, s3));
        dcpp::StateDict state = matrix_state(-1, rank);
        const std::optional<dcpp::CheckpointInfo> info = managers[rank]->restore(state);
        if (!info) return;
        outcome.step = info->step;
        const std::string key = "w" + std::to_string(rank);
        outcome.bit_for_bit =
            state.at("step").value().toInt() == info->step &&
            at::equal(state.at(key).tensor(), matrix_state(info->step, rank).at(key).tensor());
      } catch (const dcpp::CheckpointError& e) {
        outcome.error = e.what();
      }
    });
    server_.clear_faults();  // the managers' last drain passes find the store back
    managers.clear();
    return outcomes;
  }

  // The names and entity tags of the store's objects but the lease, past the proxy.
  std::vector<std::string> remote_objects() const {
    dcpp::S3Options direct = server_.options();
    direct.endpoint_url = server_.direct_endpoint();
    std::vector<std::string> objects;
    for (const dcpp::S3ObjectEntry& object : dcpp::S3Prefix(url_, direct).list()) {
      if (object.name != ".dcpp-drain-lease") objects.push_back(object.name + " " + object.etag);
    }
    return objects;
  }
  const std::vector<std::string>& objects_before() const { return objects_before_; }
  const std::string& url() const { return url_; }

 private:
  MatrixCell cell_;
  S3TestServer& server_ = S3TestServer::get();
  TempDir dir_;
  fs::path root_ = dir_ / "checkpoints";
  std::string url_ = "s3://" + server_.create_bucket("matrix") + "/run";
  std::vector<std::string> objects_before_;
};

}  // namespace

TEST_CASE("restart matrix: every store fault x local root x ranks ends alike on every rank") {
  const StoreFault store =
      GENERATE(StoreFault::kHealthy, StoreFault::kErrsOnReads, StoreFault::kStalled,
               StoreFault::kRefused, StoreFault::kStsStalled);
  const LocalRoot local = GENERATE(LocalRoot::kEmpty, LocalRoot::kOlderSteps);
  const int ranks = GENERATE(1, 2);
  INFO("store " << name_of(store) << ", local root "
                << (local == LocalRoot::kEmpty ? "empty" : "with older steps") << ", " << ranks
                << " rank(s)");
  Matrix matrix(MatrixCell{store, local, ranks});
  matrix.prepare();
  const std::vector<RestartOutcome> outcomes = matrix.restart();
  for (const RestartOutcome& outcome : outcomes) {
    INFO("rank " << (&outcome - outcomes.data()) << ": step " << outcome.step
                 << ", error: " << outcome.error);
    CHECK(outcome == outcomes.front());  // every rank alike
    CHECK(outcome.bit_for_bit);
    if (store == StoreFault::kHealthy) {
      CHECK(outcome.step == 3);  // the store's newest
    } else if (store == StoreFault::kStsStalled) {
      // No credentials, no store: the manager fails, naming it, local steps or not.
      CHECK_THAT(outcome.error, Catch::Contains(matrix.url()) && Catch::Contains("STS at") &&
                                    Catch::Contains("did not answer"));
    } else if (local == LocalRoot::kOlderSteps) {
      CHECK(outcome.error.empty());
      CHECK(outcome.step == 2);  // the local newest, forked from
    } else {
      CHECK(outcome.step == -1);  // never from scratch
      CHECK_THAT(outcome.error, Catch::Contains(matrix.url()) && Catch::Contains("cannot be read"));
      if (store == StoreFault::kStalled) {
        CHECK_THAT(outcome.error, Catch::Contains("RemoteTierOptions::restart_timeout"));
      }
    }
  }
  CHECK(matrix.remote_objects() == matrix.objects_before());  // the store's steps untouched
}
