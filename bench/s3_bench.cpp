// dcpp's save and load to an S3-compatible store against curl moving the same bytes in the same
// run: `s3_bench s3://BUCKET/PREFIX [--mb N] [--tensors T] [--repeat R]`, the store and
// credentials from the AWS_* environment (docs/storage.md). Prints MB/s and the ratios
// dcpp/curl (target: at least 0.8).

#include "bench_common.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/s3_options.h>

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <unistd.h>

namespace {

// Runs a shell command; exits the bench when it fails (a baseline that failed measures nothing).
void run_or_exit(const std::string& command) {
  if (std::system(command.c_str()) != 0) {
    std::cerr << "s3_bench: failed: " << command << "\n";
    std::exit(1);
  }
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// curl signing as dcpp does (AWS Signature V4, unsigned payload), path-style.
std::string curl_command(const std::string& bucket, const std::string& key) {
  const std::string endpoint = env_or("AWS_ENDPOINT_URL", "");
  const std::string region = env_or("AWS_REGION", "us-east-1");
  return "curl -sS --fail -o /dev/null --aws-sigv4 aws:amz:" + region + ":s3 --user '" +
         env_or("AWS_ACCESS_KEY_ID", "") + ":" + env_or("AWS_SECRET_ACCESS_KEY", "") +
         "' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' " + endpoint + "/" + bucket + "/" + key;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Save and load to an S3 store against curl uploading and downloading the same bytes");
  std::string url;
  int megabytes = 256;
  int tensors = 8;
  int repeat = 3;
  app.add_option("URL", url, "s3://BUCKET/PREFIX to write under (the store from AWS_*)")
      ->required();
  app.add_option("--mb", megabytes, "Checkpoint size, MB");
  app.add_option("--tensors", tensors, "Tensors the checkpoint is split into");
  app.add_option("--repeat", repeat, "Runs of each; the best is reported");
  int part_mb = 16;
  int concurrency = 8;
  app.add_option("--part-mb", part_mb, "S3Options::part_size, MiB");
  app.add_option("--concurrency", concurrency, "S3Options::concurrency");
  bench::parse_or_exit(app, argc, argv);
  if (url.rfind("s3://", 0) != 0 || env_or("AWS_ENDPOINT_URL", "").empty()) {
    std::cerr << "s3_bench: give an s3:// URL, and the store in AWS_ENDPOINT_URL\n";
    return 2;
  }
  const std::string bucket = url.substr(5, url.find('/', 5) - 5);
  const std::string prefix = url.substr(5 + bucket.size() + 1);

  dcpp::StateDict state;
  const int64_t elements = int64_t{megabytes} * 1000 * 1000 / 4 / tensors;
  for (int t = 0; t < tensors; ++t) state.insert("t" + std::to_string(t), torch::randn({elements}));
  const double bytes = static_cast<double>(elements) * 4 * tensors;
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("s3_bench_" + std::to_string(getpid()));
  {
    std::ofstream out(file, std::ios::binary);
    for (const auto& item : state) {
      const at::Tensor& t = item.value.tensor();
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    }
  }

  int run = 0;
  dcpp::SaveOptions save_options;
  save_options.s3.part_size = uint64_t(part_mb) << 20;
  save_options.s3.concurrency = concurrency;
  dcpp::LoadOptions load_options;
  load_options.s3 = save_options.s3;
  std::string last_url;
  const double save = bench::best_seconds(
      repeat, [] {},
      [&] {
        last_url = url + "/" + std::to_string(getpid()) + "-save-" + std::to_string(run++);
        dcpp::save(state, last_url, save_options);
      });
  const double upload = bench::best_seconds(
      repeat, [] {},
      [&] { run_or_exit(curl_command(bucket, prefix + "/curl-blob") + " -T " + file.string()); });
  dcpp::StateDict target;
  for (const auto& item : state) target.insert(item.key, torch::zeros_like(item.value.tensor()));
  const double load = bench::best_seconds(
      repeat, [] {}, [&] { dcpp::load(target, last_url, load_options); });
  const double download = bench::best_seconds(
      repeat, [] {}, [&] { run_or_exit(curl_command(bucket, prefix + "/curl-blob")); });
  std::filesystem::remove(file);
  for (const auto& item : state) {
    if (!target.at(item.key).tensor().equal(item.value.tensor())) {
      std::cerr << "s3_bench: loaded tensor " << item.key << " differs from the saved one\n";
      return 1;
    }
  }
  const double mb = bytes / 1e6;
  std::printf(
      "checkpoint: %.0f MB in %d tensors, best of %d; parts of %d MiB, %d requests at once\n", mb,
      tensors, repeat, part_mb, concurrency);
  std::printf("save  %7.3f s  %7.1f MB/s   curl upload   %7.3f s  %7.1f MB/s   ratio %.2f\n", save,
              mb / save, upload, mb / upload, upload / save);
  std::printf("load  %7.3f s  %7.1f MB/s   curl download %7.3f s  %7.1f MB/s   ratio %.2f\n", load,
              mb / load, download, mb / download, download / load);
  return 0;
}
