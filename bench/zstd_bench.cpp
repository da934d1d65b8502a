// What zstd compression (FileSystemWriterOptions::compression, DCP's stream.zstd/1) does to a real
// model's checkpoint: the state of a small decoder-only transformer (embedding, per layer the
// attention and MLP Linear weights and biases and two LayerNorms, an untied head), initialised as
// training initialises it (normal embeddings, Kaiming-uniform Linear weights, LayerNorm ones and
// zeros), plus Adam's state after a few steps on random gradients. Saved and loaded uncompressed
// and compressed in the same run, on the same state; prints bytes, seconds and their ratios.
//
//   zstd_bench [--dtype fp32|bf16] [--layers N] [--width N] [--vocab N] [--level N]
//              [--threads N] [--repeat N] [--sync] [--dir PATH]
//
// --dtype is the dtype of every tensor (parameters and Adam's moments: bf16 as in pure-bf16
// training). Without --sync nothing is fsynced (what the CPU costs); each time is the best of
// --repeat runs; loads read into preallocated tensors with a warm page cache.

#include <dcpp/dcpp.h>

#include "bench_common.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Options {
  std::string dtype = "fp32";
  int layers = 4;
  int64_t width = 512;
  int64_t vocab = 8192;
  int level = 3;
  int threads = 1;
  int repeat = 3;
  bool sync = false;
  fs::path dir = fs::temp_directory_path() / "dcpp-zstd-bench";
};

Options parse(int argc, char** argv) {
  Options options;
  CLI::App app("zstd compression of a transformer's state and Adam's, against none", "zstd_bench");
  app.add_option("--dtype", options.dtype, "parameter dtype")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--layers", options.layers, "transformer layers");
  app.add_option("--width", options.width, "model width");
  app.add_option("--vocab", options.vocab, "vocabulary size");
  app.add_option("--level", options.level, "zstd level");
  app.add_option("--threads", options.threads, "writer threads");
  app.add_option("--repeat", options.repeat, "runs of each timing; the best counts");
  app.add_flag("--sync", options.sync, "fsync what is written");
  app.add_option("--dir", options.dir, "scratch directory");
  bench::parse_or_exit(app, argc, argv);
  return options;
}

struct Parameter {
  std::string name;
  at::Tensor value;  // float32 master copy, updated by Adam
};

// torch.nn.Linear's initialisation: weight and bias uniform in +-1/sqrt(fan_in).
void linear(std::vector<Parameter>& out, const std::string& name, int64_t in, int64_t outs) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  out.push_back({name + ".weight", at::empty({outs, in}).uniform_(-bound, bound)});
  out.push_back({name + ".bias", at::empty({outs}).uniform_(-bound, bound)});
}

void layer_norm(std::vector<Parameter>& out, const std::string& name, int64_t width) {
  out.push_back({name + ".weight", at::ones({width})});
  out.push_back({name + ".bias", at::zeros({width})});
}

std::vector<Parameter> transformer(const Options& o) {
  std::vector<Parameter> p;
  p.push_back({"embed.weight", at::randn({o.vocab, o.width})});
  for (int l = 0; l < o.layers; ++l) {
    const std::string prefix = "layers." + std::to_string(l);
    layer_norm(p, prefix + ".norm1", o.width);
    linear(p, prefix + ".attn.qkv", o.width, 3 * o.width);
    linear(p, prefix + ".attn.out", o.width, o.width);
    layer_norm(p, prefix + ".norm2", o.width);
    linear(p, prefix + ".mlp.up", o.width, 4 * o.width);
    linear(p, prefix + ".mlp.down", 4 * o.width, o.width);
  }
  layer_norm(p, "final_norm", o.width);
  linear(p, "head", o.width, o.vocab);
  return p;
}

uint64_t directory_bytes(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) total += entry.file_size();
  }
  return total;
}

dcpp::StateDict zeros_like(const dcpp::StateDict& state) {
  dcpp::StateDict out;
  for (const auto& item : state) {
    if (item.value.is_tensor()) {
      out.insert(item.key, at::zeros_like(item.value.tensor()));
    } else if (item.value.is_dict()) {
      out.insert(item.key, zeros_like(item.value.dict()));
    } else {
      out.insert(item.key, item.value);
    }
  }
  return out;
}

struct Result {
  uint64_t bytes = 0;
  double save_s = 1e30;
  double load_s = 1e30;
};

Result measure(const Options& o, const dcpp::StateDict& state, bool zstd, const fs::path& dir) {
  dcpp::SaveOptions save;
  save.file_system.sync_files = o.sync;
  save.file_system.overwrite = true;
  save.file_system.thread_count = o.threads;
  if (zstd) save.file_system.with_compression(dcpp::Compression::kZstd, o.level);
  dcpp::LoadOptions load;
  load.file_system.thread_count = o.threads;
  Result result;
  dcpp::StateDict target = zeros_like(state);
  result.save_s = bench::best_seconds(
      o.repeat, [&] { fs::remove_all(dir); }, [&] { dcpp::save(state, dir, save); });
  result.load_s = bench::best_seconds(
      o.repeat, [] {}, [&] { dcpp::load(target, dir, load); });
  result.bytes = directory_bytes(dir);
  // Bit for bit.
  const at::Tensor a = state.at("model").dict().at("embed.weight").tensor();
  const at::Tensor b = target.at("model").dict().at("embed.weight").tensor();
  if (!at::equal(a, b)) {
    std::fprintf(stderr, "loaded state differs\n");
    std::exit(1);
  }
  return result;
}

void row(const char* what, const Result& plain, const Result& zstd) {
  std::printf(
      "%-14s %9.1f MB %9.1f MB  %5.3f   save %6.3f s %6.3f s  x%5.2f   load %6.3f s "
      "%6.3f s  x%5.2f\n",
      what, plain.bytes / 1e6, zstd.bytes / 1e6,
      static_cast<double>(zstd.bytes) / static_cast<double>(plain.bytes), plain.save_s, zstd.save_s,
      zstd.save_s / plain.save_s, plain.load_s, zstd.load_s, zstd.load_s / plain.load_s);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const at::ScalarType dtype = o.dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  at::manual_seed(0);
  std::vector<Parameter> params = transformer(o);

  // Adam (lr 1e-3, betas 0.9/0.999, eps 1e-8) for a few steps on random gradients of a plausible
  // scale, as after the first steps of training.
  constexpr int kSteps = 5;
  std::vector<at::Tensor> m, v;
  for (const Parameter& p : params) {
    m.push_back(at::zeros_like(p.value));
    v.push_back(at::zeros_like(p.value));
  }
  for (int step = 1; step <= kSteps; ++step) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const at::Tensor grad = at::randn_like(params[i].value) * 1e-2;
      m[i].mul_(0.9).add_(grad, 0.1);
      v[i].mul_(0.999).addcmul_(grad, grad, 0.001);
      const double m_hat = 1.0 - std::pow(0.9, step);
      const double v_hat = 1.0 - std::pow(0.999, step);
      params[i].value.sub_((m[i] / m_hat) / ((v[i] / v_hat).sqrt() + 1e-8) * 1e-3);
    }
  }

  dcpp::StateDict model;
  dcpp::StateDict optimizer_state;
  int64_t numel = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    model.insert(params[i].name, params[i].value.to(dtype));
    dcpp::StateDict moments;
    moments.insert("step", at::scalar_tensor(static_cast<double>(kSteps)));
    moments.insert("exp_avg", m[i].to(dtype));
    moments.insert("exp_avg_sq", v[i].to(dtype));
    optimizer_state.insert(params[i].name, moments);
    numel += params[i].value.numel();
  }
  dcpp::StateDict model_only;
  model_only.insert("model", model);
  dcpp::StateDict with_adam;
  with_adam.insert("model", model);
  dcpp::StateDict optim;
  optim.insert("state", optimizer_state);
  optim.insert("lr", 1e-3);
  with_adam.insert("optim", optim);

  std::printf(
      "transformer: %d layers, width %lld, vocab %lld: %.1f M parameters, %s; zstd level %d, "
      "%d thread(s), %s, best of %d\n",
      o.layers, static_cast<long long>(o.width), static_cast<long long>(o.vocab), numel / 1e6,
      o.dtype.c_str(), o.level, o.threads, o.sync ? "fsync" : "no fsync", o.repeat);
  std::printf("%-14s %12s %12s  %5s   %-22s %7s   %-22s %7s\n", "state", "plain", "zstd", "ratio",
              "save plain / zstd", "", "load plain / zstd", "");
  fs::create_directories(o.dir);
  row("model", measure(o, model_only, false, o.dir / "plain"),
      measure(o, model_only, true, o.dir / "zstd"));
  row("model + Adam", measure(o, with_adam, false, o.dir / "plain"),
      measure(o, with_adam, true, o.dir / "zstd"));
  fs::remove_all(o.dir);
  return 0;
}
