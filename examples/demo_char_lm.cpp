// demo_char_lm: the `make demo` job. A small character-level language model learns the GNU GPL
// (/usr/share/common-licenses/GPL-3, on every Debian machine) through the training-loop plugin.
//
//   dcpp-launch -n 2 -- demo_char_lm train DIR STEPS SAVE_EVERY KILL_STEP
//       FSDP on 2 ranks, async checkpoints every SAVE_EVERY steps; at KILL_STEP (a save step)
//       every rank SIGKILLs itself once the save of that step has created its temporary
//       directory: the job dies mid-save. Rank 0 appends "step S loss L" lines to
//       DIR/../train-losses.txt.
//   dcpp-launch -n 3 -- demo_char_lm resume DIR STEPS
//       data parallel on 3 ranks: resumes from the latest complete checkpoint, trains to STEPS
//       and prints the report (losses against the killed run's, checkpoint timings).
//
// With DCPP_DEMO_REMOTE=s3://bucket/prefix in the environment (the store from the AWS_*
// variables), the manager has a remote tier: each checkpoint commits under DIR, then drains to the
// store, which keeps 10 steps to DIR's 3; a resume whose DIR was lost takes the remote's latest.
//
// The global batch is the same in both layouts (48 windows, split evenly over the ranks), so the
// resumed run continues the killed run's loss curve.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/torch.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace {

constexpr int64_t kVocab = 128, kContext = 16, kEmbedding = 32, kHidden = 128, kBatch = 48;

std::string load_text() {
  std::ifstream in("/usr/share/common-licenses/GPL-3");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() < 1000) throw std::runtime_error("cannot read /usr/share/common-licenses/GPL-3");
  for (char& c : text) c = static_cast<char>(static_cast<unsigned char>(c) % kVocab);
  return text;
}

torch::nn::Sequential make_model() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Embedding(kVocab, kEmbedding), torch::nn::Flatten(),
                               torch::nn::Linear(kContext * kEmbedding, kHidden), torch::nn::ReLU(),
                               torch::nn::Linear(kHidden, kVocab));
}

// Step `step`'s windows of this rank: inputs {B, kContext} and next characters {B}.
std::pair<at::Tensor, at::Tensor> my_batch(const std::string& text, int64_t step, int rank,
                                           int world) {
  const int64_t part = kBatch / world, span = static_cast<int64_t>(text.size()) - kContext - 1;
  at::Tensor x = at::empty({part, kContext}, at::kLong), y = at::empty({part}, at::kLong);
  for (int64_t i = 0; i < part; ++i) {
    const int64_t g = rank * part + i;  // the window's index in the global batch
    const int64_t start = (step * 7919 + g * 104729) % span;
    for (int64_t j = 0; j < kContext; ++j) x[i][j] = static_cast<int64_t>(text[start + j]);
    y[i] = static_cast<int64_t>(text[start + kContext]);
  }
  return {x, y};
}

double mean_over_ranks(const at::Tensor& loss, c10d::ProcessGroup& group) {
  std::vector<at::Tensor> value{loss.detach().reshape({1}).clone()};
  group.allreduce(value)->wait();
  return value[0].item<double>() / group.getSize();
}

std::map<int64_t, double> read_losses(const std::string& file) {
  std::map<int64_t, double> losses;
  std::ifstream in(file);
  std::string word;
  int64_t step;
  double loss;
  while (in >> word >> step >> word >> loss) losses[step] = loss;
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s train DIR STEPS SAVE_EVERY KILL_STEP | resume DIR STEPS\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const int64_t steps = std::stoll(argv[3]);
  const bool train = mode == "train";
  const int64_t save_every = train && argc > 4 ? std::stoll(argv[4]) : 0;
  const int64_t kill_step = train && argc > 5 ? std::stoll(argv[5]) : -1;
  const std::string losses_file = dir + "/../train-losses.txt";
  torch::set_num_threads(1);
  const std::string text = load_text();

  auto env = dcpp::LaunchEnvironment::from_env();
  auto store = dcpp::make_tcp_store(env);
  auto group = dcpp::make_gloo_process_group(store, env.rank, env.world_size);
  torch::nn::Sequential model = make_model();
  std::shared_ptr<dcpp::ModelLayout> layout;
  std::shared_ptr<dcpp::FullyShardedDataParallel> fsdp;
  std::shared_ptr<dcpp::DataParallel> ddp;
  if (train) {
    layout = fsdp = std::make_shared<dcpp::FullyShardedDataParallel>(model.ptr(), group);
  } else {
    layout = ddp = std::make_shared<dcpp::DataParallel>(model.ptr(), group);
  }
  auto optimizer = std::make_shared<torch::optim::Adam>(
      fsdp ? fsdp->parameters() : ddp->parameters(), torch::optim::AdamOptions(3e-3));

  std::vector<std::string> incomplete;
  if (!train && std::filesystem::exists(dir)) {  // before the manager removes them
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.find(".incomplete") != std::string::npos) incomplete.push_back(name);
    }
  }

  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(layout))
      .add("optim", dcpp::make_optimizer_stateful(layout, optimizer));
  context.content["model"] = "char-mlp vocab 128 context 16 embedding 32 hidden 128";
  context.content["data"] = "/usr/share/common-licenses/GPL-3";
  const char* remote_url = std::getenv("DCPP_DEMO_REMOTE");
  dcpp::RemoteTierOptions remote;
  if (remote_url != nullptr && *remote_url != '\0') {
    remote.with_url(remote_url).with_retention(dcpp::RetentionPolicy().with_keep_latest(10));
  }
  auto manager = std::make_shared<dcpp::CheckpointManager>(
      dcpp::CheckpointManagerOptions()
          .with_root(dir)
          .with_remote(remote)
          .with_save_every_steps(save_every)
          .with_async(true)
          .with_store(store, env.rank, env.world_size)
          .with_retention(dcpp::RetentionPolicy().with_keep_latest(3))
          // The data-parallel resume reads each saved byte once: one rank reads it and sends it
          // to the others (the default does so on a network file system, not on a local disk).
          .with_read_once(train ? dcpp::ReadOnce::kAuto : dcpp::ReadOnce::kAlways)
          .with_metrics_file(dir + "/../metrics.jsonl"));
  // SIGTERM keeps killing: the launcher uses it.
  dcpp::CheckpointCallback checkpoints(
      manager, dcpp::CheckpointCallbackOptions().with_preemption_signals({SIGUSR1}));

  const auto load_start = std::chrono::steady_clock::now();
  checkpoints.on_train_begin(context);
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const int64_t first_step = context.step;

  std::ofstream losses_out;
  if (train && env.rank == 0) {
    losses_out.open(losses_file, std::ios::app);
    losses_out.precision(9);
  }
  std::map<int64_t, double> resumed_losses;
  const auto train_start = std::chrono::steady_clock::now();
  while (context.step < steps && !context.should_stop()) {
    auto [x, y] = my_batch(text, context.step, env.rank, env.world_size);
    optimizer->zero_grad();
    if (fsdp) fsdp->gather_parameters();
    at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    if (fsdp) {
      fsdp->reduce_gradients();
    } else {
      ddp->synchronize_gradients();
    }
    optimizer->step();
    context.step += 1;
    context.metrics["loss"] = mean_over_ranks(loss, *group);
    if (env.rank == 0) {
      if (train)
        losses_out << "step " << context.step << " loss " << context.metrics["loss"] << "\n"
                   << std::flush;
      resumed_losses[context.step] = context.metrics["loss"];
      if (context.step % 25 == 0 || context.step == first_step + 1) {
        std::printf("[%s %d ranks] step %4lld loss %.4f\n", train ? "fsdp" : "ddp", env.world_size,
                    static_cast<long long>(context.step), context.metrics["loss"]);
        std::fflush(stdout);
      }
    }
    checkpoints.on_step_end(context);
    if (context.step == kill_step) {  // the save of this step is in flight: die now, every rank
      // Once its temporary directory exists (data being written), so the kill lands mid-save.
      const std::string temporary =
          dir + "/" + dcpp::step_directory_name(kill_step) + ".incomplete";
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!std::filesystem::exists(temporary) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (env.rank == 0) {
        std::printf("[fsdp 2 ranks] step %4lld: async save started, SIGKILL to every rank\n",
                    static_cast<long long>(context.step));
        std::fflush(stdout);
      }
      ::kill(::getpid(), SIGKILL);
    }
  }
  const double train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - train_start).count();
  checkpoints.on_train_end(context);
  if (train || env.rank != 0) return 0;

  // The report.
  std::printf("\n=== dcpp demo report ===\n");
  for (const auto& name : incomplete) {
    std::printf("left by the killed job (ignored by latest(), removed on start): %s\n",
                name.c_str());
  }
  if (checkpoints.resumed_from()) {
    std::printf("resumed from %s (step %lld, saved by %d FSDP ranks) on %d DDP ranks in %.3f s\n",
                checkpoints.resumed_from()->path.c_str(), static_cast<long long>(first_step),
                checkpoints.resumed_from()->world_size, env.world_size, load_seconds);
  } else {
    std::printf("no checkpoint to resume from: trained from scratch\n");
  }
  const std::map<int64_t, double> before = read_losses(losses_file);
  std::printf("\n step   killed run (2x FSDP)   resumed run (3x DDP)\n");
  for (int64_t s = first_step + 1; s <= std::min(steps, first_step + 5); ++s) {
    const auto b = before.find(s);
    if (b == before.end()) {
      std::printf(" %4lld   %20s   %20.6f\n", static_cast<long long>(s), "-", resumed_losses[s]);
    } else {
      std::printf(" %4lld   %20.6f   %20.6f\n", static_cast<long long>(s), b->second,
                  resumed_losses[s]);
    }
  }
  if (before.count(1) != 0) {
    std::printf(
        " first loss of the killed run: %.4f (step 1); last of the resumed run: %.4f (step "
        "%lld)\n",
        before.at(1), resumed_losses[context.step], static_cast<long long>(context.step));
  }
  std::printf("\n checkpoint          bytes(rank 0)  plan s   stage s   write s   loss\n");
  for (const auto& c : manager->list()) {
    std::printf(" %-18s %13lld  %6.3f   %7.3f   %7.3f   %.4f\n", c.path.filename().c_str(),
                static_cast<long long>(c.bytes), c.plan_seconds, c.stage_seconds, c.write_seconds,
                c.metrics.count("loss") ? c.metrics.at("loss") : 0.0);
  }
  if (remote.enabled()) {
    std::printf("\n remote tier %s:", remote.url.c_str());
    for (const auto& c : manager->list_remote()) std::printf(" %s", c.path.filename().c_str());
    std::printf("\n");
  }
  std::printf("\n resumed training: %lld steps in %.2f s; phase log: %s/../metrics.jsonl\n",
              static_cast<long long>(context.step - first_step), train_seconds, dir.c_str());
  return 0;
}
