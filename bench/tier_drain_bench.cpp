// The training-step cost of a remote tier's drain. One training loop (a 3-layer MLP of width W,
// Adam, batches of B) runs three times in one process, each time from the same seed:
//   none:   no checkpoints (the baseline);
//   local:  an async checkpoint every K steps to a local root (keep the latest 2);
//   tiered: the same, with a remote tier draining every committed step to s3://BUCKET/PREFIX
//           (verified, keep the latest 2 there too).
// It prints each run's mean step time and the ratios tiered/local and tiered/none, then how long
// the drain took to catch up after the loop (not part of any step). The store and credentials
// come from the AWS_* environment (docs/storage.md).
//
// With --drain-gib G instead: one step of G GiB (float tensors of 64 MiB) committed to a local
// root, then drained by a manager given the remote tier (from its construction to
// wait_for_remote()), against one `curl -T` of the same bytes (the step's files in one file, one
// PUT signed by curl's --aws-sigv4; the endpoint from AWS_ENDPOINT_URL), in the same run.
//
//   tier_drain_bench s3://BUCKET/PREFIX [--steps N] [--every K] [--width W] [--batch B]
//                    [--verify 0|1] [--dir PATH] [--drain-gib G]

#include <dcpp/dcpp.h>

#include "bench_common.h"

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <unistd.h>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Options {
  std::string url;
  int steps = 100;
  int every = 10;
  int64_t width = 1024;
  int64_t batch = 32;
  bool verify = false;
  fs::path dir = fs::temp_directory_path() / "dcpp-tier-drain-bench";
  double drain_gib = 0;
  int files_at_once = dcpp::RemoteTierOptions().files_at_once;
  uint64_t part_size_mib = dcpp::S3Options().part_size >> 20;
  bool content_md5 = dcpp::S3Options().content_md5;
};

struct Run {
  double step_seconds = 0;      // mean over the loop's steps, saves included
  double catch_up_seconds = 0;  // after the loop: the last commits (and drain passes)
  int64_t state_bytes = 0;
};

Run train(const Options& o, const char* mode) {
  const bool checkpoints = std::string(mode) != "none";
  const bool tiered = std::string(mode) == "tiered";
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(64, o.width), torch::nn::Tanh(),
                              torch::nn::Linear(o.width, o.width), torch::nn::Tanh(),
                              torch::nn::Linear(o.width, 8));
  auto optimizer =
      std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
  std::shared_ptr<dcpp::ModelLayout> layout = dcpp::plain_layout(*model);
  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(layout))
      .add("optim", dcpp::make_optimizer_stateful(layout, optimizer));

  const fs::path root = o.dir / mode;
  fs::remove_all(root);
  dcpp::CheckpointManagerOptions options;
  options.with_root(root).with_save_every_steps(o.every).with_async(true).with_retention(
      dcpp::RetentionPolicy().with_keep_latest(2));
  if (tiered) {
    options.with_remote(
        dcpp::RemoteTierOptions().with_url(o.url).with_verify(o.verify).with_retention(
            dcpp::RetentionPolicy().with_keep_latest(2)));
  }
  std::shared_ptr<dcpp::CheckpointManager> manager;
  std::unique_ptr<dcpp::CheckpointCallback> callback;
  if (checkpoints) {
    manager = std::make_shared<dcpp::CheckpointManager>(options);
    callback = std::make_unique<dcpp::CheckpointCallback>(manager);
  }

  Run run;
  const auto start = bench::Clock::now();
  for (int step = 0; step < o.steps; ++step) {
    at::Tensor x = at::randn({o.batch, 64}), y = at::randn({o.batch, 8});
    optimizer->zero_grad();
    at::mse_loss(model->forward(x), y).backward();
    optimizer->step();
    context.step += 1;
    if (callback) callback->on_step_end(context);
  }
  run.step_seconds = bench::seconds_since(start) / o.steps;
  const auto catch_up = bench::Clock::now();
  if (manager) {
    manager->wait();
    if (tiered) manager->wait_for_remote();
    for (const auto& record : manager->history()) {
      run.state_bytes = std::max(run.state_bytes, record.bytes);
    }
  }
  run.catch_up_seconds = bench::seconds_since(catch_up);
  return run;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// --drain-gib: the drain of one large step against one curl upload of its bytes.
int drain_one_step(const Options& o) {
  const std::string endpoint = env_or("AWS_ENDPOINT_URL", "");
  if (endpoint.empty()) {
    std::fprintf(stderr, "--drain-gib needs AWS_ENDPOINT_URL (and the credentials in AWS_*)\n");
    return 2;
  }
  const fs::path root = o.dir / "drain";
  fs::remove_all(o.dir);
  const int64_t tensors = std::max<int64_t>(1, static_cast<int64_t>(o.drain_gib * 16));
  dcpp::StateDict state;
  for (int64_t i = 0; i < tensors; ++i) {
    state.insert("layer" + std::to_string(i), at::randn({16, 1024, 1024}));  // 64 MiB
  }
  {
    dcpp::CheckpointManager local(
        dcpp::CheckpointManagerOptions().with_root(root).with_async(false));
    dcpp::SaveRequest first;
    first.step = 1;
    local.save(state, first);
  }
  const std::string prefix = o.url + "/drain-" + std::to_string(::getpid());
  dcpp::S3Options s3;
  s3.part_size = o.part_size_mib << 20;
  s3.content_md5 = o.content_md5;
  auto start = bench::Clock::now();
  {
    dcpp::CheckpointManager tiered(
        dcpp::CheckpointManagerOptions().with_root(root).with_async(false).with_remote(
            dcpp::RemoteTierOptions()
                .with_url(prefix)
                .with_verify(o.verify)
                .with_files_at_once(o.files_at_once)
                .with_s3(s3)));
    tiered.wait_for_remote();  // the drain pass of step 1, posted by the constructor
  }
  const double drain_seconds = bench::seconds_since(start);

  // The same bytes as one file, one PUT.
  const fs::path joined = o.dir / "joined";
  {
    std::ofstream out(joined, std::ios::binary);
    for (const auto& entry : fs::directory_iterator(root / "step-00000001")) {
      std::ifstream in(entry.path(), std::ios::binary);
      out << in.rdbuf();
    }
  }
  const uint64_t bytes = fs::file_size(joined);
  const std::string bucket = o.url.substr(5, o.url.find('/', 5) - 5);
  const std::string command =
      "curl -sS --fail -o /dev/null --aws-sigv4 'aws:amz:" + env_or("AWS_REGION", "us-east-1") +
      ":s3' --user '" + env_or("AWS_ACCESS_KEY_ID", "") + ":" +
      env_or("AWS_SECRET_ACCESS_KEY", "") + "' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T '" +
      joined.string() + "' '" + endpoint + "/" + bucket + "/curl-" + std::to_string(::getpid()) +
      "'";
  start = bench::Clock::now();
  const int status = std::system(command.c_str());
  const double curl_seconds = bench::seconds_since(start);
  if (status != 0) {
    std::fprintf(stderr, "curl failed (status %d): %s\n", status, command.c_str());
    return 1;
  }
  std::printf(
      "one step of %.2f GiB (%lld tensors of 64 MiB), verify %d, content MD5 %d, files at once "
      "%d, parts of %llu MiB\n",
      bytes / 1073741824.0, static_cast<long long>(tensors), o.verify ? 1 : 0,
      o.content_md5 ? 1 : 0, o.files_at_once, static_cast<unsigned long long>(o.part_size_mib));
  std::printf("%-24s %10s %10s\n", "", "seconds", "MiB/s");
  std::printf("%-24s %10.2f %10.1f\n", "drain of the step", drain_seconds,
              bytes / 1048576.0 / drain_seconds);
  std::printf("%-24s %10.2f %10.1f\n", "curl -T of its bytes", curl_seconds,
              bytes / 1048576.0 / curl_seconds);
  std::printf("drain / curl: %.2f\n", drain_seconds / curl_seconds);
  fs::remove_all(o.dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("The training-step cost of draining checkpoints to a remote tier",
               "tier_drain_bench");
  app.add_option("URL", o.url, "s3://BUCKET/PREFIX of the remote tier (the store from AWS_*)")
      ->required();
  app.add_option("--steps", o.steps, "training steps per run");
  app.add_option("--every", o.every, "save every K steps");
  app.add_option("--width", o.width, "model width");
  app.add_option("--batch", o.batch, "samples per step");
  app.add_option("--verify", o.verify, "read every uploaded object back (RemoteTierOptions)");
  app.add_option("--dir", o.dir, "local roots");
  app.add_option("--files-at-once", o.files_at_once, "files a drain uploads at once");
  app.add_option("--part-size-mib", o.part_size_mib, "S3Options::part_size of the drain, MiB");
  app.add_option("--content-md5", o.content_md5, "S3Options::content_md5 of the drain");
  app.add_option("--drain-gib", o.drain_gib,
                 "instead: drain one step of this many GiB, against one curl upload");
  bench::parse_or_exit(app, argc, argv);
  if (o.drain_gib > 0) return drain_one_step(o);

  train(o, "none");  // warm-up: allocator, thread pools
  const Run none = train(o, "none");
  const Run local = train(o, "local");
  const Run tiered = train(o, "tiered");
  std::printf("state %.1f MiB, %d steps, a checkpoint every %d (torch threads %d)\n",
              local.state_bytes / 1048576.0, o.steps, o.every, torch::get_num_threads());
  std::printf("%-8s %12s %14s\n", "run", "step ms", "catch-up s");
  for (const auto& [name, run] : {std::pair{"none", none}, {"local", local}, {"tiered", tiered}}) {
    std::printf("%-8s %12.3f %14.3f\n", name, run.step_seconds * 1e3, run.catch_up_seconds);
  }
  std::printf("step time ratio tiered/local: %.3f   tiered/none: %.3f   local/none: %.3f\n",
              tiered.step_seconds / local.step_seconds, tiered.step_seconds / none.step_seconds,
              local.step_seconds / none.step_seconds);
  fs::remove_all(o.dir);
  return 0;
}
