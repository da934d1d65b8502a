// `torch.save` of a nested state dict, streamed. data.pkl needs only each tensor's dtype and shape,
// which the source knows up front, so it is written first (over meta placeholders, in the opcodes
// libtorch reads too: torch_save_pickle.h); then each storage record `data/<i>` is read, cast and
// written in turn, as PyTorch 2.6 lays out the archive: data.pkl, byteorder, data/0..., version,
// .data/serialization_id.

#include "convert/destination.h"
#include "convert/format_writers.h"
#include "convert/torch_save_pickle.h"

#include "format/file_io.h"
#include "format/zip/zip_blob_writer.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <random>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;

// PyTorch's archive root: the file name without its extension ("archive" when that is empty).
std::string archive_name(const fs::path& dst) {
  std::string stem = dst.stem().string();
  return stem.empty() ? "archive" : stem;
}

std::string serialization_id() {
  std::mt19937_64 random(
      std::random_device{}() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  char id[48];
  std::snprintf(id, sizeof(id), "%020llu%020llu",
                static_cast<unsigned long long>(random() % 10000000000000000000ULL), 0ULL);
  return id;
}

void write_archive(Conversion& conversion, const fs::path& partial, const std::string& root_name) {
  StateDict state = conversion.placeholder_state_dict();
  std::vector<at::Tensor> tensors;
  const std::string pickle = encode_torch_save_pickle(to_ivalue(StateValue(state)), tensors);

  detail::File file(partial, detail::File::Mode::kCreateTruncate);
  detail::FileSink sink(file);
  detail::ZipBlobWriter zip(sink, root_name);
  zip.add("data.pkl", pickle.data(), pickle.size());
  zip.add("byteorder", "little", 6);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SourceEntry* entry = conversion.entry_of(tensors[i]);
    // A tensor inside a value (a bytes item holding tensors) is real already.
    const at::Tensor data =
        entry != nullptr ? conversion.read_tensor(*entry) : tensors[i].contiguous();
    zip.add("data/" + std::to_string(i), data.data_ptr(), data.numel() * data.element_size());
  }
  zip.add("version", "3\n", 2);
  const std::string id = serialization_id();
  zip.add(".data/serialization_id", id.data(), id.size());
  zip.finish();
  sink.flush();
  file.sync();
  file.close();
}

}  // namespace

std::vector<fs::path> write_torch_save(Conversion& conversion, const fs::path& dst) {
  require_new_file(dst);
  const fs::path partial = dst.string() + ".partial";
  try {
    write_archive(conversion, partial, archive_name(dst));
    fs::rename(partial, dst);
  } catch (...) {
    std::error_code ignored;
    fs::remove(partial, ignored);
    throw;
  }
  return {dst};
}

}  // namespace dcpp::tools
