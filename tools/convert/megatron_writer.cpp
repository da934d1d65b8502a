// `dcpp convert --to megatron`: a Megatron-Core `torch_dist` checkpoint from any source, through
// dcpp's own save with the library's Megatron writer (megatron_storage.h), its tensors streamed as
// `write_dcp` streams them. A Megatron source's common state and ShardedObjects are values of the
// source and go through as they are (its common state must be among the entries converted); any
// other source's values become the common state.

#include "convert/destination.h"
#include "convert/format_writers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/megatron_storage.h>

#include <algorithm>

namespace dcpp::tools {

namespace fs = std::filesystem;

namespace {

// The source's tensors as they are, and its values as Megatron's common state at their paths.
StateDict with_values_as_common_state(Conversion& conversion, StateDict placeholders) {
  StateDict tensors, common;
  for (const SourceEntry& entry : conversion.source().entries()) {
    StateValue* value = find_element(placeholders, entry.path);
    set_element(entry.is_tensor ? tensors : common, entry.path, std::move(*value));
  }
  megatron::add_common_state(tensors, std::move(common));
  return tensors;
}

}  // namespace

std::vector<fs::path> write_megatron(Conversion& conversion, const fs::path& dst,
                                     bool integrity_file) {
  require_new_directory(dst);
  StateDict state = conversion.placeholder_state_dict();
  if (conversion.source().format() != kMegatronLayout) {
    state = with_values_as_common_state(conversion, std::move(state));
  } else if (std::none_of(
                 conversion.source().entries().begin(), conversion.source().entries().end(),
                 [](const SourceEntry& entry) { return entry.key == kMegatronCommonStateKey; })) {
    throw CheckpointError(ErrorKind::kUsage,
                          "the entries selected leave out the Megatron-Core checkpoint's common "
                          "state (" +
                              std::string(kMegatronCommonStateKey) +
                              "), which Megatron-Core's load reads first: keep it in --keys, "
                              "and out of --drop");
  }
  SaveOptions options;
  options.planner = make_streaming_save_planner(conversion);
  MegatronWriterOptions writing;
  writing.file_system.thread_count = 1;
  writing.file_system.single_file_per_rank = true;
  writing.integrity_file = integrity_file;
  const auto writer = make_megatron_writer(dst, writing);
  const Metadata metadata = save(state, *writer, options);
  std::vector<fs::path> files{dst / ".metadata"};
  for (fs::path& file : data_files_of(dst, metadata)) files.push_back(std::move(file));
  files.push_back(dst / kMegatronConfigFile);
  if (integrity_file) files.push_back(dst / kMegatronIntegrityFile);
  return files;
}

}  // namespace dcpp::tools
