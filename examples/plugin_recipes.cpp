// plugin_recipes: the training-loop plugin's everyday questions, one function each, as
// docs/plugin.md ("Recipes") shows them. Runs alone or under `dcpp-launch -n N`:
//
//   plugin_recipes DIR
//
// Each recipe checks its outcome; the program prints "recipe <name>: ok" for each and exits 0, or
// names the recipe that went wrong and exits 1.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Where the store for with_store() comes from. One process: no store (world size 1). Under
// dcpp-launch or torchrun: the job's TCPStore, from the torchrun variables; rank 0 serves it. Keep
// it: the manager makes its groups from it, and so may the training loop (other group names).
struct Job {
  dcpp::LaunchEnvironment env;
  c10::intrusive_ptr<c10d::Store> store;  // null for one process

  static Job from_environment() {
    Job job;
    if (std::getenv("WORLD_SIZE") != nullptr) {
      job.env = dcpp::LaunchEnvironment::from_env();
      job.store = dcpp::make_tcp_store(job.env);
    }
    return job;
  }

  // The manager's options for `root`, on every rank of the job.
  dcpp::CheckpointManagerOptions manager_options(const fs::path& root) const {
    dcpp::CheckpointManagerOptions options;
    options.with_root(root);
    if (store) options.with_store(store, env.rank, env.world_size);
    return options;
  }
};

// A model and its optimizer. Layouts are shared_ptrs (std::shared_ptr<const dcpp::ModelLayout>):
// make one and hand it to both adapters; they keep it alive.
struct Training {
  torch::nn::Linear model{nullptr};
  std::shared_ptr<torch::optim::SGD> optimizer;
  dcpp::TrainingContext context;

  Training() {
    torch::manual_seed(0);
    model = torch::nn::Linear(4, 2);
    optimizer = std::make_shared<torch::optim::SGD>(model->parameters(),
                                                    torch::optim::SGDOptions(0.1).momentum(0.9));
    std::shared_ptr<const dcpp::ModelLayout> layout = dcpp::plain_layout(*model);
    context.add("model", dcpp::make_model_stateful(layout))
        .add("optim", dcpp::make_optimizer_stateful(layout, optimizer));
  }

  void step() {
    optimizer->zero_grad();
    model->forward(at::ones({3, 4})).pow(2).mean().backward();
    optimizer->step();
    context.step += 1;
  }

  // Trains up to `last_step` with `checkpoints`, as a loop does.
  void run(dcpp::CheckpointCallback& checkpoints, int64_t last_step) {
    checkpoints.on_train_begin(context);
    while (context.step < last_step && !context.should_stop()) {
      step();
      checkpoints.on_step_end(context);
    }
    checkpoints.on_train_end(context);
  }
};

std::vector<int64_t> steps_under(const fs::path& root) {
  std::vector<int64_t> steps;
  for (const dcpp::CheckpointInfo& info : dcpp::list_checkpoints(root)) steps.push_back(info.step);
  return steps;
}

bool check(bool ok, const std::string& recipe, const std::string& what) {
  if (!ok) std::fprintf(stderr, "recipe %s: %s\n", recipe.c_str(), what.c_str());
  return ok;
}

// Retention: keep the latest 3, and every 10th step for good.
bool retention(const Job& job, const fs::path& root) {
  {
    auto manager = std::make_shared<dcpp::CheckpointManager>(
        job.manager_options(root).with_save_every_steps(2).with_retention(
            dcpp::RetentionPolicy().with_keep_latest(3).with_keep_every_steps(10)));
    dcpp::CheckpointCallback checkpoints(manager);
    Training training;
    training.run(checkpoints, 16);
  }
  // The coordinator commits and prunes: it alone knows, once its own saves are done.
  return job.env.rank != 0 ||
         check(steps_under(root) == std::vector<int64_t>{10, 12, 14, 16}, "retention",
               "expected steps 10 (every 10th), 12, 14 and 16 (the latest 3)");
}

// Resuming from a given step (or path) rather than the latest, through the callback's options.
bool resume_from_step(const Job& job, const fs::path& root) {
  const auto options = dcpp::CheckpointCallbackOptions()
                           .with_resume(dcpp::RestoreRequest().with_step(12))  // or .with_path()
                           .with_save_at_end(false);
  dcpp::CheckpointCallback checkpoints(
      std::make_shared<dcpp::CheckpointManager>(job.manager_options(root)), options);
  Training training;
  checkpoints.on_train_begin(training.context);
  return check(training.context.step == 12 && checkpoints.resumed_from() &&
                   checkpoints.resumed_from()->step == 12,
               "resume_from_step", "expected to resume at step 12");
}

// The same with the manager alone: RestoreRequest names the checkpoint.
bool restore_request(const Job& job, const fs::path& root) {
  dcpp::CheckpointManager manager(job.manager_options(root));
  Training training;
  dcpp::RestoreRequest request;
  request.path = root / dcpp::step_directory_name(14);
  const std::optional<dcpp::CheckpointInfo> info = manager.restore(training.context.state, request);
  return check(info && info->step == 14, "restore_request", "expected the checkpoint of step 14");
}

// A step that is not there: the error lists the ones that are.
bool missing_step(const Job& job, const fs::path& root) {
  dcpp::CheckpointManager manager(job.manager_options(root));
  Training training;
  dcpp::RestoreRequest request;
  request.step = 13;
  try {
    manager.restore(training.context.state, request);
  } catch (const dcpp::CheckpointError& error) {
    const std::string message = error.what();
    if (job.env.rank == 0) std::printf("resuming from step 13: %s\n", message.c_str());
    return check(message.find("are of steps 10, 12, 14, 16") != std::string::npos, "missing_step",
                 "expected the steps there in: " + message);
  }
  return check(false, "missing_step", "restoring a step that is not there did not throw");
}

// A job that must continue refuses to start fresh on a root without a checkpoint (a typo).
bool require_resume(const Job& job, const fs::path& root) {
  const auto options = dcpp::CheckpointCallbackOptions().with_require_resume(true);
  dcpp::CheckpointCallback checkpoints(
      std::make_shared<dcpp::CheckpointManager>(job.manager_options(root.string() + "-typo")),
      options);
  Training training;
  try {
    checkpoints.on_train_begin(training.context);
  } catch (const dcpp::CheckpointError& error) {
    return check(std::string(error.what()).find("require_resume") != std::string::npos,
                 "require_resume", error.what());
  }
  return check(false, "require_resume", "an empty root did not throw");
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // first: dcpp-launch --fork forks the ranks here
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const fs::path root = fs::path(argv[1]) / "ckpt";
  torch::set_num_threads(1);
  const Job job = Job::from_environment();
  struct Recipe {
    const char* name;
    bool (*run)(const Job&, const fs::path&);
  };
  for (const Recipe& recipe :
       {Recipe{"retention", retention}, Recipe{"resume_from_step", resume_from_step},
        Recipe{"restore_request", restore_request}, Recipe{"missing_step", missing_step},
        Recipe{"require_resume", require_resume}}) {
    if (!recipe.run(job, root)) return 1;
    std::printf("recipe %s: ok\n", recipe.name);
  }
  return 0;
}
