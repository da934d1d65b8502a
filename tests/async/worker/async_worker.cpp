// One rank of the multi-rank async tests, started by dcpp-launch with the torchrun variables set.
//
//   async_worker save DIR   three async saves of a row-sharded tensor, a replicated tensor and a
//                           step counter, over the checkpointer's own Gloo group, while the
//                           "training loop" runs allreduces on its own group and changes every
//                           tensor as soon as staging completes; each checkpoint must hold the
//                           values at its save time. Prints "saved N" and exits 0 when they do.
//   async_worker fail DIR   rank 1's state fails to stage: every rank's upload future must throw
//                           promptly, naming rank 1. Prints "failed as expected: MESSAGE".

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/async/tbb_stager.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/dist/launched_rank.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/state_dict/stateful.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

namespace {

struct Broken : dcpp::Stateful {
  dcpp::StateDict state_dict() override {
    throw dcpp::CheckpointError(dcpp::ErrorKind::kUsage, "this rank cannot stage");
  }
  void load_state_dict(const dcpp::StateDict&) override {}
};

bool same_tensor(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && at::equal(a, b);
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // dcpp-launch --fork: the ranks fork from here
  if (argc != 3) {
    std::fprintf(stderr, "usage: async_worker save|fail DIR\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::filesystem::path dir = argv[2];
  try {
    const dcpp::LaunchEnvironment env = dcpp::LaunchEnvironment::from_env();
    // Failing promptly must stand apart from waiting for a dead rank: in "fail" mode, a rank that
    // waited for the group's timeout would take 300 s, where the failure takes seconds.
    const auto timeout = std::chrono::seconds(mode == "fail" ? 300 : 30);
    auto store = dcpp::make_tcp_store(env, dcpp::ProcessGroupOptions().with_timeout(timeout));
    auto training = dcpp::make_gloo_process_group(
        store, env.rank, env.world_size, dcpp::ProcessGroupOptions().with_timeout(timeout));

    dcpp::AsyncCheckpointerOptions options;
    // The checkpointer makes its own group from the job's store.
    options.ranks.with_store(store, env.rank, env.world_size);
    options.group_options.timeout = timeout;
    dcpp::TbbStagerOptions stager;
    stager.concurrency = 2;
    options.stager = dcpp::make_tbb_stager(stager);
    options.file_system.sync_files = false;
    dcpp::AsyncCheckpointer checkpointer(options);
    if (checkpointer.process_group().get() == training.get() ||
        checkpointer.process_group()->getSize() != env.world_size) {
      std::fprintf(stderr, "the checkpointer must have a group of its own\n");
      return 1;
    }

    at::Tensor full = at::arange(10 * 6, at::kFloat).reshape({10, 6});  // the same on every rank
    at::Tensor bias = at::arange(5, at::kDouble);
    auto total_step = [&](at::Tensor t) {
      std::vector<at::Tensor> tensors{t};
      training->allreduce(tensors)->wait();
      return tensors[0];
    };

    if (mode == "fail") {
      dcpp::StateDict state;
      state.insert("embedding",
                   dcpp::ShardedTensor::from_chunk_of(full, 0, env.rank, env.world_size));
      if (env.rank == 1) {
        state.insert("broken", std::make_shared<Broken>());
      }
      const auto started = std::chrono::steady_clock::now();
      dcpp::AsyncSaveResponse response = checkpointer.async_save(state, dir / "failed");
      try {
        response.committed.wait();
        std::fprintf(stderr, "the save should have failed\n");
        return 1;
      } catch (const dcpp::CheckpointError& error) {
        const std::string message = error.what();
        if (message.find("rank 1") == std::string::npos ||
            message.find("this rank cannot stage") == std::string::npos) {
          std::fprintf(stderr, "unexpected message: %s\n", message.c_str());
          return 1;
        }
        std::printf("failed as expected: %s\n", message.c_str());
        std::printf("failed after %lld ms\n",
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - started)
                                               .count()));
      }
      if (std::filesystem::exists(dir / "failed" / ".metadata")) {
        std::fprintf(stderr, "a failed save committed .metadata\n");
        return 1;
      }
      total_step(at::ones({1}));  // rank 0 keeps the store alive until everyone is done
      return 0;
    }

    int saved = 0;
    for (int step = 0; step < 3; ++step) {
      const at::Tensor expected_full = full.clone();
      const at::Tensor expected_bias = bias.clone();
      dcpp::StateDict state;
      state.insert("embedding",
                   dcpp::ShardedTensor::from_chunk_of(full, 0, env.rank, env.world_size));
      state.insert("bias", bias);
      state.insert("step", step);
      const std::filesystem::path where = dir / ("step-" + std::to_string(step));

      dcpp::AsyncSaveResponse response = checkpointer.async_save(state, where);
      // Training collectives on the training group while the save's run on the other one.
      at::Tensor gradient = total_step(at::ones({1000}));
      response.staged.wait();
      full.add_(gradient.narrow(0, 0, 1).item<float>());  // change every element
      bias.mul_(-2).add_(1);
      total_step(at::ones({10}));
      response.committed.wait();

      dcpp::StateDict loaded = dcpp::load_from_keys(where);
      if (!same_tensor(loaded.at("embedding").tensor(), expected_full) ||
          !same_tensor(loaded.at("bias").tensor(), expected_bias) ||
          loaded.at("step").value().toInt() != step) {
        std::fprintf(stderr, "checkpoint %s does not hold the save-time values\n", where.c_str());
        return 1;
      }
      ++saved;
    }
    total_step(at::ones({1}));
    std::printf("saved %d\n", saved);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rank error: %s\n", error.what());
    return 1;
  }
}
