// Reading once (docs/distributed.md, "Reading once"): bytes that several ranks need are read from
// storage by one rank and sent to the others; failures while reading once still reach every rank.
// Real processes over Gloo, started by dcpp-launch. A file of its own: the sanitizer stages run it
// (Makefile, READ_ONCE_TEST).

#include "dcpp_test.h"
#include "reshard_launch.h"

#include <cstdio>
#include <string>
#include <vector>

using dcpp::test::count;
using dcpp::test::launch;

namespace {

// What one rank of `read-once DIR LAYOUT` printed: bytes read and received from the other ranks,
// without and with reading once.
struct ReadOnceFigures {
  unsigned long long never = 0;
  unsigned long long once = 0;
  long long received_never = 0;
  long long received_once = 0;
};

std::vector<ReadOnceFigures> read_once_figures(const std::string& output, const std::string& layout,
                                               int ranks) {
  std::vector<ReadOnceFigures> figures;
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string prefix = "rank " + std::to_string(rank) + " read ";
    std::size_t at = output.find(prefix);
    while (at != std::string::npos &&
           output.compare(output.find('(', at), layout.size() + 2, "(" + layout + ")") != 0) {
      at = output.find(prefix, at + 1);
    }
    REQUIRE(at != std::string::npos);
    ReadOnceFigures rank_figures;
    REQUIRE(std::sscanf(output.c_str() + at + prefix.size(),
                        "%llu never, %llu once, received %lld never, %lld once",
                        &rank_figures.never, &rank_figures.once, &rank_figures.received_never,
                        &rank_figures.received_once) == 4);
    figures.push_back(rank_figures);
  }
  return figures;
}

}  // namespace

TEST_CASE("reading once, each saved byte that several ranks need is read from storage once") {
  const std::string& ckpt = dcpp::test::shared_row_checkpoint();
  std::string output;
  REQUIRE(launch(3, "read-once " + ckpt + " replicated,row", &output) == 0);
  CHECK(count(output, ": every element equal") == 6);
  // Replicated (a data-parallel resume): every rank needs every saved item whole, so reading once
  // the ranks together read what one rank reads alone, each a part, and receive the rest.
  const std::vector<ReadOnceFigures> replicated = read_once_figures(output, "replicated", 3);
  unsigned long long once = 0;
  for (const ReadOnceFigures& rank : replicated) {
    CHECK(rank.never == replicated[0].never);
    CHECK(rank.once < rank.never / 2);
    CHECK(rank.received_once > rank.received_never);  // what it did not read, it received
    once += rank.once;
  }
  CHECK(once == replicated[0].never);
  // Row: the ranks' model boxes differ, so only what every rank holds ("replicated", "step") is
  // read once.
  const std::vector<ReadOnceFigures> row = read_once_figures(output, "row", 3);
  unsigned long long row_never = 0, row_once = 0;
  for (const ReadOnceFigures& rank : row) {
    row_never += rank.never;
    row_once += rank.once;
  }
  CHECK(row_once < row_never);
  CHECK(row_once > row_never / 2);

  // A failure reading once still reaches every rank: a planner throwing on rank 1, while reading
  // or while placing what it received; a Stateful rejecting its state after the exchange; a rank's
  // storage failing in an all-or-nothing load, which leaves every rank's targets as they were.
  REQUIRE(launch(3, "fail-commit " + ckpt + " 1", &output) == 0);
  CHECK(count(output, "failed as expected") == 3);
  REQUIRE(launch(3, "fail-apply " + ckpt + " 2", &output, "DCPP_TEST_READ_ONCE=always") == 0);
  CHECK(count(output, "failed as expected") == 3);
  REQUIRE(launch(3, "atomic-read " + ckpt + " 2", &output, "DCPP_TEST_READ_ONCE=always") == 0);
  CHECK(count(output, "targets unchanged") == 3);
}

TEST_CASE("reading once, ranks whose tensors differ in dtype each get what storage gives them") {
  const std::string& ckpt = dcpp::test::shared_row_checkpoint();
  // Every rank holds every tensor (replicated), so each reads a third of the boxes and receives
  // the rest from ranks whose destinations have another dtype: a box must travel as storage held
  // it (float32 "w", float64 "e", bfloat16 "b"), not as the sender's destination holds it.
  std::string output;
  REQUIRE(launch(3, "read-once-dtypes " + ckpt + " bfloat16,float16,float64", &output) == 0);
  CHECK(count(output, "every element as storage gives it") == 3);
  CHECK(count(output, "received 0 bytes") == 0);
}
