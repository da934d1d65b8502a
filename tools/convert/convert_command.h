#pragma once
// `dcpp convert SRC DST --to torch-save|dcp|safetensors|hf|megatron [--dtype bf16|fp16|fp32]
//  [--keys PREFIX...] [--drop PREFIX...] [--max-shard-size SIZE] [--compress zstd
//  [--compress-level N]] [--integrity]`: a
//  checkpoint, or the part of it under some keys, in another format, streamed one tensor at a
//  time.

#include <CLI/CLI.hpp>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::tools {

enum class TargetFormat { kTorchSave, kDcp, kSafetensors, kHuggingFace, kMegatron };

struct ConvertOptions {
  TargetFormat to = TargetFormat::kTorchSave;
  /// Floating tensors of at least one dimension are cast to this dtype (Conversion); nullopt keeps
  /// every dtype.
  std::optional<at::ScalarType> dtype;
  /// Only the entries under these FQN prefixes (key_selection.h); empty: every entry.
  std::vector<std::string> keys;
  /// Not the entries under these FQN prefixes (key_selection.h: Megatron-Core's
  /// remove_sharded_tensors, as a conversion).
  std::vector<std::string> drop;
  /// safetensors and hf only: the most bytes of tensor data per file (0: one file).
  uint64_t max_shard_size = 0;
  /// megatron only: write `integrity.json` (Megatron-Core's verify_integrity=True).
  bool integrity_file = false;
  /// dcp only: zstd-compress every item (DCP's stream.zstd/1) at `compress_level`.
  bool compress_zstd = false;
  int compress_level = 3;
  /// Draw a progress bar on stderr (only ever when stderr is a terminal).
  bool progress = true;
};

struct ConvertSummary {
  std::size_t tensors = 0;
  std::size_t values = 0;
  uint64_t tensor_bytes = 0;  // of the source's tensors
  std::vector<std::filesystem::path> files;
  /// hf only: the values left out (safetensors hold only tensors), by flat key.
  std::vector<std::string> skipped_values;
};

/// Reads `src` (any source of checkpoint_source.h) and writes it to `dst` in `options.to`'s
/// format. Throws CheckpointError naming the file and key on anything malformed or unwritable.
ConvertSummary convert_checkpoint(const std::filesystem::path& src,
                                  const std::filesystem::path& dst, const ConvertOptions& options);

/// "1000", "500MB", "5GB" (powers of 1000), "2GiB" (powers of 1024). Throws CheckpointError.
uint64_t parse_size(const std::string& text);

/// Registers the `convert` subcommand on `app`.
void add_convert_command(CLI::App& app);

}  // namespace dcpp::tools
