// Fuzz target: a safetensors file in a Hugging Face directory, through everything a load does with
// it: the header codec (length, JSON, dtypes, shapes, data ranges, overlaps, __metadata__ and
// DCP_SHARDING_INFO), the Metadata the reader builds from it (chunk overlap and coverage), and,
// when every tensor has at most 65536 elements, load_from_keys, which reads each tensor's bytes.
//
// Contract checked: any bytes either load or throw CheckpointError.

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/huggingface_storage.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxElements = int64_t{1} << 16;

/// A directory of this process, removed at exit, whose one safetensors file each input replaces.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::error_code error;
    const fs::path parent =
        fs::is_directory("/dev/shm", error) ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string pattern = (parent / "dcpp-safetensors-fuzzer-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("safetensors_fuzzer: mkdtemp");
      std::abort();
    }
    directory_ = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }
  const fs::path& directory() const { return directory_; }

  void write(const uint8_t* data, std::size_t size) const {
    std::FILE* file = std::fopen((directory_ / "model.safetensors").c_str(), "wb");
    if (file == nullptr || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0) {
      std::perror("safetensors_fuzzer: writing the file");
      std::abort();
    }
  }

 private:
  fs::path directory_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const ScratchDirectory scratch;
  scratch.write(data, size);
  try {
    const dcpp::Metadata metadata =
        dcpp::make_huggingface_reader(scratch.directory())->read_metadata();
    for (const auto& [key, storage] : metadata.state_dict_metadata) {
      int64_t numel = 1;
      for (int64_t n : std::get<dcpp::TensorStorageMetadata>(storage).size) {
        if (n > kMaxElements || (numel *= n) > kMaxElements) return 0;
      }
    }
    dcpp::load_from_keys(scratch.directory());
  } catch (const dcpp::CheckpointError&) {
  }
  return 0;
}
