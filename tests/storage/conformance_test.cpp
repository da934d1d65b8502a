// One suite of storage tests for every driver (storage_drivers.h), as tensorstore runs one for
// its kvstore drivers: what a checkpoint layout promises, whatever keeps its bytes.

#include "dcpp_test.h"
#include "storage_drivers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/planner/save_planner.h>

#include <algorithm>

using dcpp::StateDict;
using dcpp::test::require_equal;
using dcpp::test::StorageDriver;
using dcpp::test::zeros_like;

namespace {

// Runs the test case once per driver (a section of each).
#define DRIVER_UNDER_TEST() \
  dcpp::test::make_storage_driver(GENERATE(as<std::string>{}, "filesystem", "s3", "huggingface"))

StateDict sample_state(bool with_values) {
  StateDict state;
  state.insert("model.embed.weight", at::randn({64, 33}));
  state.insert("model.head.weight", at::randn({17, 5}).to(at::kBFloat16));
  state.insert("model.head.bias", at::randint(-1000, 1000, {17}, at::kLong));
  state.insert("model.mask", at::rand({9, 4}) > 0.5);
  // Larger than the test server's 5 MiB part: a multipart upload of three parts on S3.
  state.insert("model.big", at::randn({3, 1000, 1000}));
  if (with_values) {
    state.insert("step", c10::IValue(int64_t{1234}));
    state.insert("name", c10::IValue(std::string("run \xce\xbb")));
  }
  return state;
}

void save_with(StorageDriver& driver, const StateDict& state, const std::string& location,
               dcpp::FileSystemWriterOptions layout = {}) {
  auto writer = driver.writer(location, layout);
  dcpp::save(state, *writer);
}

void load_with(StorageDriver& driver, StateDict& state, const std::string& location) {
  auto reader = driver.reader(location);
  dcpp::load(state, *reader);
}

// The first data file of the checkpoint at `location` (not `.metadata`, not an index).
std::string a_data_file(StorageDriver& driver, const std::string& location) {
  for (const std::string& name : driver.list(location)) {
    if (name.size() > 7 &&
        (name.compare(name.size() - 7, 7, ".distcp") == 0 ||
         name.find(".safetensors") != std::string::npos) &&
        name.find(".json") == std::string::npos) {
      return name;
    }
  }
  FAIL("no data file at " << location);
  return "";
}

dcpp::ErrorKind kind_of(const std::function<void()>& f, std::string& message) {
  try {
    f();
  } catch (const dcpp::CheckpointError& error) {
    message = error.what();
    return error.kind();
  }
  FAIL("no CheckpointError was thrown");
  return dcpp::ErrorKind::kUsage;
}

// A planner that fails on the n-th item it is asked for: a save that breaks mid-write.
class FailingSavePlanner final : public dcpp::DefaultSavePlanner {
 public:
  explicit FailingSavePlanner(int fail_at) : fail_at_(fail_at) {}
  dcpp::WriteItemData resolve_data(const dcpp::WriteItem& item) override {
    if (++seen_ == fail_at_) throw std::runtime_error("the planner failed mid-save");
    return DefaultSavePlanner::resolve_data(item);
  }

 private:
  int fail_at_;
  int seen_ = 0;
};

}  // namespace

TEST_CASE("storage conformance: what is saved loads back bit for bit") {
  auto driver = DRIVER_UNDER_TEST();
  INFO("driver " << driver->name());
  const StateDict saved = sample_state(driver->holds_values());
  const std::string location = driver->new_location();
  save_with(*driver, saved, location);
  StateDict loaded = zeros_like(saved);
  load_with(*driver, loaded, location);
  require_equal(loaded, saved);
}

TEST_CASE("storage conformance: a resharded load reads the box it asks for") {
  auto driver = DRIVER_UNDER_TEST();
  INFO("driver " << driver->name());
  const at::Tensor full = at::randn({10, 1000});
  StateDict saved;
  saved.insert("w", full);
  const std::string location = driver->new_location();
  save_with(*driver, saved, location);
  // Rows 3..6 and columns 200..699 only, as one rank of a 2-d sharded layout holds them.
  std::vector<dcpp::Shard> shards{{at::zeros({4, 500}), {3, 200}}};
  StateDict target;
  target.insert("w", dcpp::ShardedTensor({10, 1000}, std::move(shards), at::kFloat));
  load_with(*driver, target, location);
  REQUIRE(dcpp::test::bitwise_equal(target.at("w").sharded_tensor().local_shards()[0].tensor,
                                    full.narrow(0, 3, 4).narrow(1, 200, 500)));
}

TEST_CASE("storage conformance: an empty location holds no checkpoint") {
  auto driver = DRIVER_UNDER_TEST();
  INFO("driver " << driver->name());
  std::string message;
  const dcpp::ErrorKind kind =
      kind_of([&] { driver->reader(driver->new_location())->read_metadata(); }, message);
  CHECK(kind == dcpp::ErrorKind::kNotFound);
}

TEST_CASE(
    "storage conformance: a save over a checkpoint is refused unless asked, then replaces "
    "it whole") {
  auto driver = DRIVER_UNDER_TEST();
  if (!driver->protects_existing()) return;
  INFO("driver " << driver->name());
  const std::string location = driver->new_location();
  const StateDict first = sample_state(driver->holds_values());
  save_with(*driver, first, location);
  const std::vector<std::string> first_files = driver->list(location);

  std::string message;
  CHECK(kind_of([&] { save_with(*driver, sample_state(true), location); }, message) ==
        dcpp::ErrorKind::kUsage);
  CHECK_THAT(message, Catch::Contains("already holds a checkpoint"));
  CHECK(driver->list(location) == first_files);

  const StateDict second = sample_state(driver->holds_values());
  save_with(*driver, second, location, dcpp::FileSystemWriterOptions().with_overwrite(true));
  StateDict loaded = zeros_like(second);
  load_with(*driver, loaded, location);
  require_equal(loaded, second);
  // The replaced checkpoint's data files are gone; as many remain as the first save wrote.
  const std::vector<std::string> second_files = driver->list(location);
  CHECK(second_files.size() == first_files.size());
  for (const std::string& name : second_files) {
    if (name.rfind("__", 0) == 0)
      CHECK(std::find(first_files.begin(), first_files.end(), name) == first_files.end());
  }
}

TEST_CASE(
    "storage conformance: a save that fails mid-write leaves the previous checkpoint "
    "whole") {
  auto driver = DRIVER_UNDER_TEST();
  if (!driver->protects_existing()) return;
  INFO("driver " << driver->name());
  const std::string location = driver->new_location();
  const StateDict first = sample_state(driver->holds_values());
  save_with(*driver, first, location);
  const std::string metadata = driver->read(location, ".metadata");

  auto writer = driver->writer(location, dcpp::FileSystemWriterOptions().with_overwrite(true));
  dcpp::SaveOptions failing;
  failing.planner = std::make_shared<FailingSavePlanner>(4);
  std::string message;
  kind_of([&] { dcpp::save(sample_state(driver->holds_values()), *writer, failing); }, message);
  CHECK_THAT(message, Catch::Contains("the planner failed mid-save"));

  CHECK(driver->read(location, ".metadata") == metadata);
  StateDict loaded = zeros_like(first);
  load_with(*driver, loaded, location);
  require_equal(loaded, first);
}

TEST_CASE("storage conformance: a truncated data file is an error naming it") {
  auto driver = DRIVER_UNDER_TEST();
  INFO("driver " << driver->name());
  const std::string location = driver->new_location();
  const StateDict saved = sample_state(driver->holds_values());
  save_with(*driver, saved, location);
  const std::string file = a_data_file(*driver, location);
  const std::string bytes = driver->read(location, file);
  driver->write(location, file, bytes.substr(0, bytes.size() / 2));

  std::string message;
  const dcpp::ErrorKind kind = kind_of(
      [&] {
        StateDict loaded = zeros_like(saved);
        load_with(*driver, loaded, location);
      },
      message);
  CHECK(kind == dcpp::ErrorKind::kCorrupt);
  CHECK_THAT(message, Catch::Contains(file));
}

TEST_CASE("storage conformance: a changed byte fails its item's checksum, naming file and key") {
  auto driver = DRIVER_UNDER_TEST();
  if (!driver->holds_values()) return;  // no checksum file in a Hugging Face directory
  INFO("driver " << driver->name());
  const std::string location = driver->new_location();
  StateDict saved;
  saved.insert("only", at::randn({256, 256}));
  save_with(*driver, saved, location);
  const std::string file = a_data_file(*driver, location);
  std::string bytes = driver->read(location, file);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  driver->write(location, file, bytes);

  std::string message;
  const dcpp::ErrorKind kind = kind_of(
      [&] {
        StateDict loaded = zeros_like(saved);
        load_with(*driver, loaded, location);
      },
      message);
  CHECK(kind == dcpp::ErrorKind::kCorrupt);
  CHECK_THAT(message, Catch::Contains(driver->describe(location, file)) &&
                          Catch::Contains("key 'only'") && Catch::Contains("CRC-32"));
}

TEST_CASE("storage conformance: zstd-compressed items load back bit for bit") {
  auto driver = DRIVER_UNDER_TEST();
  if (!driver->holds_values()) return;  // safetensors are never compressed
  INFO("driver " << driver->name());
  const StateDict saved = sample_state(true);
  const std::string location = driver->new_location();
  save_with(*driver, saved, location,
            dcpp::FileSystemWriterOptions().with_compression(dcpp::Compression::kZstd, 3));
  StateDict loaded = zeros_like(saved);
  load_with(*driver, loaded, location);
  require_equal(loaded, saved);
}
