// The crash harness's checker: a state record written and read back compares equal, and each kind
// of difference a broken resume could produce is reported.

#include "state_record.h"

#include "dcpp_test.h"

#include <dcpp/state_dict/sharded_tensor.h>

#include <cstring>

namespace {

using crash::compare_with_saved;
using crash::make_record;
using crash::Record;

const at::Tensor kWeight = at::arange(12, at::kFloat).reshape({4, 3}).div(7);

// The state a rank of a `world`-rank job holds: `w` split by rows, a replicated step and value.
dcpp::StateDict rank_state(int rank, int world, const at::Tensor& weight = kWeight) {
  dcpp::StateDict state;
  state.insert("w", dcpp::ShardedTensor::from_chunk_of(weight, 0, rank, world));
  state.insert("step", at::tensor({7}, at::kLong));
  state.insert("position", int64_t{84});
  state.insert("lr", 0.1);
  return state;
}

std::vector<Record> saved_by(int world) {
  std::vector<Record> records;
  for (int r = 0; r < world; ++r) records.push_back(make_record(rank_state(r, world)));
  return records;
}

std::string joined(const crash::Comparison& c) {
  std::string text;
  for (const auto& m : c.mismatches) text += m + "\n";
  return text;
}

}  // namespace

TEST_CASE("a record written durably reads back equal, bit for bit") {
  dcpp::test::TempDir dir;
  const Record written = make_record(rank_state(1, 2));
  crash::write_record(written, dir / "step-00000004.rank-1");
  CHECK_FALSE(std::filesystem::exists(dir / "step-00000004.rank-1.tmp"));
  const Record read = crash::read_record(dir / "step-00000004.rank-1");
  const crash::Comparison c = compare_with_saved(rank_state(1, 2), {read});
  CHECK(c.equal());
  CHECK(c.entries == 4);
  CHECK(c.bytes == 2 * 3 * 4 + 8);  // rows 2..3 of w, and step
}

TEST_CASE("a truncated record is refused naming the file") {
  dcpp::test::TempDir dir;
  crash::write_record(make_record(rank_state(0, 2)), dir / "r");
  const std::string bytes = dcpp::test::read_file(dir / "r");
  dcpp::test::write_file(dir / "r", bytes.substr(0, bytes.size() - 3));
  CHECK_THROWS_WITH(crash::read_record(dir / "r"),
                    Catch::Contains("is malformed") && Catch::Contains((dir / "r").string()));
}

TEST_CASE("a state resharded to another world size compares with the pieces of every saved rank") {
  const std::vector<Record> saved = saved_by(2);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << " of 3");
    CHECK(compare_with_saved(rank_state(r, 3), saved).equal());
  }
  dcpp::StateDict whole = rank_state(0, 1);  // one rank, plain tensor
  whole.insert_or_assign("w", kWeight.clone());
  CHECK(compare_with_saved(whole, saved).equal());
}

TEST_CASE("one flipped bit of a loaded tensor is a mismatch naming the key and box") {
  at::Tensor weight = kWeight.clone();
  int32_t bits;
  std::memcpy(&bits, weight.data_ptr<float>() + 10, 4);
  bits ^= 1;
  std::memcpy(weight.data_ptr<float>() + 10, &bits, 4);
  const crash::Comparison c = compare_with_saved(rank_state(1, 2, weight), saved_by(2));
  REQUIRE(c.mismatches.size() == 1);
  CHECK_THAT(c.mismatches[0],
             Catch::Contains("w: the loaded box at [2,0]") && Catch::Contains("1 of 6 elements"));
}

TEST_CASE("a changed value, a missing key and an extra key are mismatches") {
  dcpp::StateDict state = rank_state(0, 2);
  state.insert_or_assign("position", int64_t{85});
  state.erase("lr");
  state.insert("extra", at::zeros({1}));
  const crash::Comparison c = compare_with_saved(state, saved_by(2));
  const std::string text = joined(c);
  CHECK(c.mismatches.size() == 3);
  CHECK_THAT(text, Catch::Contains("position: loaded 85, saved 84"));
  CHECK_THAT(text, Catch::Contains("lr: saved, but not loaded"));
  CHECK_THAT(text, Catch::Contains("extra: loaded, but no saved rank recorded it"));
}

TEST_CASE("a doubles' last bit counts: values compare exactly") {
  dcpp::StateDict state = rank_state(0, 2);
  state.insert_or_assign("lr", std::nextafter(0.1, 1.0));
  CHECK(compare_with_saved(state, saved_by(2)).mismatches.size() == 1);
}

TEST_CASE("saved ranks that disagree on a replicated tensor are reported") {
  std::vector<Record> saved = saved_by(2);
  dcpp::StateDict other = rank_state(1, 2);
  other.insert_or_assign("step", at::tensor({8}, at::kLong));
  saved[1] = make_record(other);
  const crash::Comparison c = compare_with_saved(rank_state(0, 2), saved);
  REQUIRE_FALSE(c.equal());
  CHECK_THAT(joined(c), Catch::Contains("step: saving ranks recorded different values"));
}

TEST_CASE("a loaded box no saved rank covered is reported") {
  std::vector<Record> saved{make_record(rank_state(0, 2))};  // rank 1's record lost
  const crash::Comparison c = compare_with_saved(rank_state(1, 2), saved);
  CHECK_THAT(joined(c), Catch::Contains("w: the loaded box at [2,0] was not saved by any rank"));
}
