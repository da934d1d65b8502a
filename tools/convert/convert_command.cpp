#include "convert/convert_command.h"

#include "convert/checkpoint_source.h"
#include "convert/format_writers.h"
#include "convert/key_selection.h"

#include <dcpp/core/checkpoint_error.h>

#include <cctype>
#include <iostream>
#include <map>

namespace dcpp::tools {

ConvertSummary convert_checkpoint(const std::filesystem::path& src,
                                  const std::filesystem::path& dst, const ConvertOptions& options) {
  std::unique_ptr<CheckpointSource> source = open_checkpoint_source(src);
  if (!options.keys.empty()) source = select_keys(std::move(source), options.keys, src.string());
  if (!options.drop.empty()) source = drop_keys(std::move(source), options.drop, src.string());
  ConvertSummary summary;
  for (const SourceEntry& entry : source->entries()) {
    (entry.is_tensor ? summary.tensors : summary.values) += 1;
  }
  summary.tensor_bytes = Conversion::total_bytes(*source);
  ProgressBar progress("convert", summary.tensor_bytes, options.progress && stderr_is_terminal(),
                       stderr);
  Conversion conversion(*source, options.dtype, progress);
  switch (options.to) {
    case TargetFormat::kTorchSave:
      summary.files = write_torch_save(conversion, dst);
      break;
    case TargetFormat::kDcp:
      summary.files = write_dcp(
          conversion, dst,
          options.compress_zstd ? std::optional<int>(options.compress_level) : std::nullopt);
      break;
    case TargetFormat::kSafetensors:
      summary.files = write_safetensors(conversion, dst, options.max_shard_size);
      break;
    case TargetFormat::kMegatron:
      summary.files = write_megatron(conversion, dst, options.integrity_file);
      break;
    case TargetFormat::kHuggingFace:
      summary.files =
          write_huggingface(conversion, dst, options.max_shard_size, summary.skipped_values);
      summary.values -= summary.skipped_values.size();
      break;
  }
  progress.finish();
  return summary;
}

uint64_t parse_size(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::map<std::string, uint64_t> kUnits = {{"", 1},
                                                         {"B", 1},
                                                         {"KB", 1000ULL},
                                                         {"MB", 1000ULL * 1000},
                                                         {"GB", 1000ULL * 1000 * 1000},
                                                         {"TB", 1000ULL * 1000 * 1000 * 1000},
                                                         {"KIB", 1ULL << 10},
                                                         {"MIB", 1ULL << 20},
                                                         {"GIB", 1ULL << 30},
                                                         {"TIB", 1ULL << 40}};
  auto found = kUnits.find(unit);
  if (digits == 0 || digits > 15 || found == kUnits.end()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "'" + text + "' is not a size (e.g. 1000, 500MB, 5GB, 2GiB)");
  }
  const uint64_t size = std::stoull(text.substr(0, digits)) * found->second;
  if (size == 0) throw CheckpointError(ErrorKind::kUsage, "a shard size must be more than 0 bytes");
  return size;
}

void add_convert_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "convert",
      "Write a checkpoint in another format (DCP, torch.save, safetensors, Hugging Face, "
      "Megatron-Core)");
  auto src = std::make_shared<std::string>();
  auto dst = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>();
  auto max_shard = std::make_shared<std::string>();
  auto compress = std::make_shared<std::string>();
  auto compress_level = std::make_shared<int>(3);
  auto keys = std::make_shared<std::vector<std::string>>();
  auto drop = std::make_shared<std::vector<std::string>>();
  command
      ->add_option("SRC", *src,
                   "A DCP checkpoint directory or s3://BUCKET/PREFIX, a Megatron-Core or Hugging "
                   "Face directory, a torch.save file of a state dict, a .safetensors file or a "
                   "safetensors *.index.json")
      ->required();
  command
      ->add_option("DST", *dst,
                   "Where to write: a file (torch-save, safetensors), a directory (dcp, hf, "
                   "megatron) or s3://BUCKET/PREFIX (dcp)")
      ->required();
  command->add_option("--to", *to, "The format to write")
      ->required()
      ->check(CLI::IsMember({"torch-save", "dcp", "safetensors", "hf", "megatron"}));
  command->add_option("--dtype", *dtype, "Cast floating tensors but 0-dim ones to this dtype")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  command->add_option("--keys", *keys,
                      "Convert only the entries under these FQN prefixes, matched on whole "
                      "components ('model' matches model.w, not models.w)");
  command->add_option("--drop", *drop,
                      "Leave out the entries under these FQN prefixes, matched as --keys matches "
                      "them (Megatron-Core's remove_sharded_tensors, into a new checkpoint)");
  command->add_option("--max-shard-size", *max_shard,
                      "safetensors, hf: split into files of at most this much tensor data, with an "
                      "index (e.g. 5GB, 500MB, 2GiB)");
  command
      ->add_option("--compress", *compress,
                   "dcp: compress every item with zstd (DCP's stream.zstd/1; PyTorch 2.14's "
                   "dcp.load reads it, older PyTorch does not)")
      ->check(CLI::IsMember({"zstd"}));
  command->add_option("--compress-level", *compress_level, "zstd's level, 1 to 19 (default 3)")
      ->check(CLI::Range(1, 19));
  auto integrity = std::make_shared<bool>(false);
  command->add_flag("--integrity", *integrity,
                    "megatron: write integrity.json, the SHA-256 of every file (Megatron-Core's "
                    "verify_integrity=True)");
  command->callback([=] {
    ConvertOptions options;
    options.keys = *keys;
    options.drop = *drop;
    options.to = *to == "dcp"           ? TargetFormat::kDcp
                 : *to == "safetensors" ? TargetFormat::kSafetensors
                 : *to == "hf"          ? TargetFormat::kHuggingFace
                 : *to == "megatron"    ? TargetFormat::kMegatron
                                        : TargetFormat::kTorchSave;
    if (!dtype->empty()) {
      options.dtype = *dtype == "bf16" ? at::kBFloat16 : *dtype == "fp16" ? at::kHalf : at::kFloat;
    }
    if (!max_shard->empty()) {
      if (options.to != TargetFormat::kSafetensors && options.to != TargetFormat::kHuggingFace) {
        throw CheckpointError(ErrorKind::kUsage,
                              "--max-shard-size applies to --to safetensors and --to hf only");
      }
      options.max_shard_size = parse_size(*max_shard);
    }
    if (*integrity) {
      if (options.to != TargetFormat::kMegatron) {
        throw CheckpointError(ErrorKind::kUsage, "--integrity applies to --to megatron only");
      }
      options.integrity_file = true;
    }
    if (!compress->empty()) {
      if (options.to != TargetFormat::kDcp) {
        throw CheckpointError(ErrorKind::kUsage, "--compress applies to --to dcp only");
      }
      options.compress_zstd = true;
      options.compress_level = *compress_level;
    }
    const ConvertSummary summary = convert_checkpoint(*src, *dst, options);
    if (!summary.skipped_values.empty()) {
      std::cerr << "note: skipped " << summary.skipped_values.size()
                << " non-tensor values, which safetensors cannot hold:";
      for (const auto& key : summary.skipped_values) std::cerr << " " << key;
      std::cerr << "\n";
    }
    std::cout << "converted " << summary.tensors << " tensors ("
              << human_bytes(summary.tensor_bytes) << ") and " << summary.values << " values to "
              << *to << ":";
    for (const auto& file : summary.files) std::cout << " " << file.string();
    std::cout << "\n";
  });
}

}  // namespace dcpp::tools
