// Locations and their registries (location.h, location_driver.h, checkpoint_layout.h): every entry
// point reaches a driver or a layout a program registers without a change of its own, and what
// cannot be resolved says what there is.

#include "dcpp_test.h"
#include "storage/alias_driver.h"
#include "storage/dcp_file_names.h"

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/huggingface_storage.h>
#include <dcpp/storage/storage_location.h>

#include <ATen/ATen.h>

namespace fs = std::filesystem;
using dcpp::Location;
using dcpp::StateDict;
using dcpp::test::error_of;

namespace {

StateDict sample_state() {
  StateDict state;
  state.insert("w", at::arange(24, at::kFloat).reshape({4, 6}));
  state.insert("b", at::arange(5, at::kDouble) * 0.5);
  state.insert("step", c10::IValue(int64_t{17}));
  return state;
}

}  // namespace

TEST_CASE("a Location says its scheme, its directory and what lies below it") {
  const Location directory("runs/step-1");
  CHECK(directory.scheme() == "file");
  CHECK(directory.is_directory());
  CHECK(directory.path() == fs::path("runs/step-1"));
  CHECK(directory.child(".metadata").url() == "runs/step-1/.metadata");

  const Location file_url("file:///data/ckpt");
  CHECK(file_url.is_directory());
  CHECK(file_url.url() == "/data/ckpt");

  const Location store = Location("s3://bucket/run/").with_s3(dcpp::S3Options().with_region("r"));
  CHECK(store.scheme() == "s3");
  CHECK_FALSE(store.is_directory());
  CHECK(store.child("step-2").url() == "s3://bucket/run/step-2");
  REQUIRE(store.child("step-2").s3() != nullptr);  // options travel below
  CHECK(store.child("step-2").s3()->region == "r");
  CHECK_THAT(error_of([&] { (void)store.path(); }).what(),
             Catch::Contains("'s3://bucket/run/' is not a directory but a s3:// location"));

  // Not a scheme: a path that happens to hold "://".
  CHECK(Location("./a://b").is_directory());
  CHECK(Location(fs::path("ckpt")).s3() == nullptr);
}

TEST_CASE("a location of an unknown scheme names it and the schemes there are drivers for") {
  const dcpp::CheckpointError error =
      error_of([] { dcpp::save(sample_state(), "gs://bucket/ckpt"); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error.what(), Catch::Contains("'gs://bucket/ckpt': no storage driver for the scheme "
                                           "'gs://' (there are drivers for "));
  CHECK_THAT(error.what(), Catch::Contains("file"));
  CHECK_THAT(error.what(), Catch::Contains("register one with register_location_driver"));
  CHECK_THAT(error_of([] { dcpp::register_location_driver("Bad Scheme", nullptr); }).what(),
             Catch::Contains("'Bad Scheme' needs a driver and a scheme of a-z"));
}

TEST_CASE("a registered driver serves save, load, load_from_keys, read_metadata and async_save") {
  dcpp::test::TempDir tmp;
  dcpp::test::AliasDriver& driver = dcpp::test::alias_driver();
  const Location location =
      Location("alias://ckpt").with_driver_options(dcpp::test::AliasRoot{tmp.path()});
  const StateDict saved = sample_state();
  const int writers = driver.writers;
  const int readers = driver.readers;

  dcpp::save(saved, location);
  CHECK(driver.writers == writers + 1);
  REQUIRE(fs::exists(tmp / "ckpt" / ".metadata"));  // where the driver put it

  StateDict loaded = dcpp::test::zeros_like(saved);
  loaded.insert_or_assign("step", c10::IValue(int64_t{0}));
  dcpp::load(loaded, location);
  dcpp::test::require_equal(loaded, saved);
  CHECK(dcpp::read_metadata(location).state_dict_metadata.size() == 3);
  const StateDict some = dcpp::load_from_keys(location, {"w"});
  REQUIRE(some.size() == 1);
  CHECK(dcpp::test::bitwise_equal(some.at("w").tensor(), saved.at("w").tensor()));
  CHECK(driver.readers == readers + 3);

  dcpp::AsyncCheckpointer checkpointer;
  dcpp::AsyncSaveResponse response = checkpointer.async_save(saved, location.child("later"));
  response.committed.get();
  CHECK(driver.writers == writers + 2);
  StateDict later = dcpp::test::zeros_like(saved);
  later.insert_or_assign("step", c10::IValue(int64_t{0}));
  dcpp::load(later, (tmp / "ckpt" / "later"));  // the same checkpoint, as a directory
  dcpp::test::require_equal(later, saved);

  // Without its options, the driver's own error comes through.
  CHECK_THAT(error_of([] { dcpp::read_metadata(Location("alias://ckpt")); }).what(),
             Catch::Contains("alias://ckpt: no AliasRoot options"));
}

TEST_CASE(
    "a layout is found from the files, or named; a name no layout has lists those there are") {
  dcpp::test::TempDir tmp;
  const StateDict saved = sample_state();
  dcpp::save(saved, tmp / "dcp");
  CHECK(dcpp::checkpoint_layout(tmp / "dcp")->name() == dcpp::kDcpLayout);

  StateDict tensors;
  tensors.insert("w", saved.at("w").tensor());
  auto writer = dcpp::make_huggingface_writer(tmp / "hf");
  dcpp::save(tensors, *writer);
  CHECK(dcpp::checkpoint_layout(tmp / "hf")->name() == dcpp::kHuggingFaceLayout);
  const auto entries = dcpp::read_metadata(tmp / "hf").state_dict_metadata;
  REQUIRE(entries.size() == 1);
  CHECK(entries.front().first == "w");

  // Named, a layout is taken as said: DCP's reader says what is missing.
  const Location as_dcp = Location(tmp / "hf").with_layout(dcpp::kDcpLayout);
  CHECK(dcpp::checkpoint_layout(as_dcp)->name() == dcpp::kDcpLayout);
  CHECK_THAT(error_of([&] { dcpp::read_metadata(as_dcp); }).what(), Catch::Contains(".metadata"));

  // Nothing there: DCP's, whose reader names the missing file.
  CHECK(dcpp::checkpoint_layout(tmp / "missing")->name() == dcpp::kDcpLayout);
  const dcpp::CheckpointError missing = error_of([&] { dcpp::read_metadata(tmp / "missing"); });
  CHECK(missing.kind() == dcpp::ErrorKind::kNotFound);

  const dcpp::CheckpointError unknown =
      error_of([&] { dcpp::read_metadata(Location(tmp / "dcp").with_layout("zarr")); });
  CHECK(unknown.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(unknown.what(), Catch::Contains("no checkpoint layout is named 'zarr' (there are "));
  CHECK_THAT(unknown.what(), Catch::Contains("huggingface, pytorch-dcp"));
}

namespace {

// A layout a program adds: a location holding a file "marker" is read through its driver's DCP
// reader, counted.
class MarkerLayout final : public dcpp::CheckpointLayout {
 public:
  std::string name() const override { return "test-marker"; }
  bool recognizes(const Location&, dcpp::LocationFiles& files) const override {
    return files.open("marker") != nullptr;
  }
  std::unique_ptr<dcpp::StorageReader> make_reader(
      const Location& location, const dcpp::FileSystemReaderOptions& reading) const override {
    ++readers;
    return dcpp::location_driver(location)->make_reader(location, reading);
  }
  mutable std::atomic<int> readers{0};
};

}  // namespace

TEST_CASE("a registered layout is asked before the built-in ones") {
  dcpp::test::TempDir tmp;
  const StateDict saved = sample_state();
  dcpp::save(saved, tmp / "ckpt");
  dcpp::test::write_file(tmp / "ckpt" / "marker", "");
  auto layout = std::make_shared<MarkerLayout>();
  dcpp::register_checkpoint_layout(layout);
  CHECK(dcpp::checkpoint_layout_names().front() == "test-marker");
  CHECK(dcpp::checkpoint_layout(tmp / "ckpt")->name() == "test-marker");
  StateDict loaded = dcpp::test::zeros_like(saved);
  loaded.insert_or_assign("step", c10::IValue(int64_t{0}));
  dcpp::load(loaded, tmp / "ckpt");
  dcpp::test::require_equal(loaded, saved);
  CHECK(layout->readers == 1);
  fs::remove(tmp / "ckpt" / "marker");
  CHECK(dcpp::checkpoint_layout(tmp / "ckpt")->name() == dcpp::kDcpLayout);
}

TEST_CASE("DCP's file names are built and recognised in one place") {
  using namespace dcpp::detail;
  CHECK(data_file_prefix(3, "ab12_") == "__3_ab12_");
  CHECK(data_file_name(data_file_prefix(3), 0) == "__3_0.distcp");
  CHECK(is_data_file_name("__3_0.distcp"));
  CHECK_FALSE(is_data_file_name("__3_0.distcp.tmp"));
  CHECK_FALSE(is_data_file_name("sub/__3_0.distcp"));
  CHECK(rank_of_data_file("__12_ab_4.distcp") == std::optional<int>(12));
  CHECK(rank_of_data_file("__x_0.distcp") == std::nullopt);
  CHECK(rank_of_data_file("model.distcp") == std::nullopt);
  CHECK(rank_metadata_file_name(7) == "__7.metadata");
  CHECK(rank_checksum_file_name(7) == "__7.checksums");
  CHECK(parse_rank_metadata_file_name("__7.metadata") == std::optional<int>(7));
  CHECK(parse_rank_metadata_file_name("__07.metadata") == std::nullopt);
  CHECK(parse_rank_metadata_file_name("__7.metadata.tmp") == std::nullopt);
  CHECK(parse_rank_metadata_file_name(".metadata") == std::nullopt);
}

// 0.1's spellings, which still work until 0.3.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_CASE("the overloads taking S3 options apart from the location still work, deprecated") {
  dcpp::test::TempDir tmp;
  const StateDict saved = sample_state();
  dcpp::save(saved, tmp / "ckpt");
  CHECK(dcpp::read_metadata(tmp / "ckpt", dcpp::S3Options()).state_dict_metadata.size() == 3);
  const StateDict some = dcpp::load_from_keys(tmp / "ckpt", {"b"}, dcpp::FileSystemReaderOptions());
  REQUIRE(some.size() == 1);
  CHECK(dcpp::test::bitwise_equal(some.at("b").tensor(), saved.at("b").tensor()));
  auto writer = dcpp::make_storage_writer((tmp / "again").string(), {}, dcpp::S3Options());
  dcpp::save(saved, *writer);
  auto reader = dcpp::make_storage_reader((tmp / "again").string(), {}, dcpp::S3Options());
  CHECK(reader->read_metadata().state_dict_metadata.size() == 3);
}
#pragma GCC diagnostic pop
