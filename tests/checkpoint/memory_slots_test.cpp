// The memory tier's two shared-memory slots per rank (storage/internal/storage/memory_slots.h):
// steps read back bit for bit, the newest complete step never overwritten, a writer that dies
// mid-write and a flipped byte detected, and sizes refused before anything is touched.

#include "dcpp_test.h"

#include <dcpp/storage/memory_slots.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

using dcpp::BytePiece;
using dcpp::MemorySlots;

namespace {

// A job name of this test process's own, its regions removed when the test ends.
class SlotsOfThisTest {
 public:
  explicit SlotsOfThisTest(const std::string& what, int64_t max_bytes = 1 << 20)
      : slots("memslots-" + what + "-" + std::to_string(::getpid()), 3, max_bytes) {
    slots.release();
  }
  ~SlotsOfThisTest() { slots.release(); }
  MemorySlots slots;
};

std::string bytes_of(int64_t step, std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((step * 131 + i * 7) & 0xff);
  return bytes;
}

int write_step(MemorySlots& slots, int64_t step, const std::string& bytes) {
  // Two pieces, so that the bytes are laid end to end from more than one source.
  const std::size_t half = bytes.size() / 2;
  return slots.write(
      step, "save-" + std::to_string(step),
      {BytePiece{bytes.data(), half}, BytePiece{bytes.data() + half, bytes.size() - half}});
}

}  // namespace

TEST_CASE("memory slots keep the newest complete step and write the other slot") {
  SlotsOfThisTest test("alternate");
  CHECK_FALSE(test.slots.newest().has_value());
  const std::string one = bytes_of(1, 10000), two = bytes_of(2, 7000), three = bytes_of(3, 12345);

  const int first = write_step(test.slots, 1, one);
  auto newest = test.slots.newest();
  REQUIRE(newest.has_value());
  CHECK(newest->step == 1);
  CHECK(newest->save_id == "save-1");
  CHECK(newest->bytes == one);

  const int second = write_step(test.slots, 2, two);
  CHECK(second != first);
  newest = test.slots.newest();
  REQUIRE(newest.has_value());
  CHECK(newest->step == 2);
  CHECK(newest->bytes == two);

  // Step 3 replaces step 1, never step 2, the newest complete one.
  CHECK(write_step(test.slots, 3, three) == first);
  newest = test.slots.newest();
  REQUIRE(newest.has_value());
  CHECK(newest->step == 3);
  CHECK(newest->slot == first);
  CHECK(newest->bytes == three);

  // A new process (a restarted rank) finds the same regions by name.
  MemorySlots reopened("memslots-alternate-" + std::to_string(::getpid()), 3, 1 << 20);
  newest = reopened.newest();
  REQUIRE(newest.has_value());
  CHECK(newest->step == 3);
  CHECK(newest->bytes == three);

  test.slots.release();
  CHECK_FALSE(test.slots.newest().has_value());
}

TEST_CASE("a writer that dies mid-write leaves the previous step in use") {
  SlotsOfThisTest test("crash");
  const std::string one = bytes_of(1, 50000);
  write_step(test.slots, 1, one);
  write_step(test.slots, 2, bytes_of(2, 50000));  // step 3 will go over step 1's slot

  // The child's second piece is an unreadable page: it dies in the middle of copying step 3.
  void* unreadable = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(unreadable != MAP_FAILED);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // die of the fault, whatever handler the test runner installed
    const std::string first_piece = bytes_of(3, 30000);
    test.slots.write(
        3, "save-3",
        {BytePiece{first_piece.data(), first_piece.size()}, BytePiece{unreadable, 4096}});
    ::_exit(0);  // not reached
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ::munmap(unreadable, 4096);
  REQUIRE(WIFSIGNALED(status));

  std::vector<std::string> problems;
  const auto newest = test.slots.newest(&problems);
  REQUIRE(newest.has_value());
  CHECK(newest->step == 2);
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0],
             Catch::Contains(test.slots.region_name(0) + ": a write of it did not finish"));

  // The next write goes to the broken slot, not over step 2.
  CHECK(write_step(test.slots, 3, bytes_of(3, 100)) == 0);
  CHECK(test.slots.newest()->step == 3);
}

TEST_CASE("a flipped byte in a slot is caught by its CRC, and the other slot used") {
  SlotsOfThisTest test("flip");
  write_step(test.slots, 1, bytes_of(1, 9000));
  const int slot = write_step(test.slots, 2, bytes_of(2, 9000));
  {
    const int fd = ::shm_open(test.slots.region_name(slot).c_str(), O_RDWR, 0);
    REQUIRE(fd >= 0);
    auto* at =
        static_cast<char*>(::mmap(nullptr, 4096 + 9000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    REQUIRE(at != MAP_FAILED);
    at[4096 + 4321] ^= 0x10;
    ::munmap(at, 4096 + 9000);
    ::close(fd);
  }
  std::vector<std::string> problems;
  const auto newest = test.slots.newest(&problems);
  REQUIRE(newest.has_value());
  CHECK(newest->step == 1);
  CHECK(newest->bytes == bytes_of(1, 9000));
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Catch::Contains(test.slots.region_name(slot) +
                                          ": corrupted (step 2: its bytes' CRC-32 does not match"));

  // Unchecked, both steps are listed; the CRC check of each tells them apart.
  const std::vector<dcpp::MemoryStep> listed = test.slots.complete_steps_unchecked();
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].step == 2);
  CHECK_FALSE(MemorySlots::crc_matches(listed[0]));
  CHECK(listed[1].step == 1);
  CHECK(MemorySlots::crc_matches(listed[1]));
}

TEST_CASE("a replica's slots: named after their holder, filled by a callback, listed by host") {
  const std::string job = "memslots-replica-" + std::to_string(::getpid());
  MemorySlots own(job, 2, 1 << 20), replica(job, 2, 1 << 20, 2, /*holder=*/0);
  own.release();
  replica.release();
  CHECK(replica.region_name(1) == "/" + std::string("dcpp.") + job + ".2.at0.1");
  // The bytes arrive through the callback; the CRC recorded is the sender's.
  own.write(5, "save-5", {BytePiece{"abcdef", 6}});
  const dcpp::MemoryStep sent = *own.newest();
  replica.write_filled(
      5, sent.save_id, sent.bytes.size(),
      [&](char* to) { std::memcpy(to, sent.bytes.data(), sent.bytes.size()); }, sent.crc32);
  const auto kept = replica.newest();
  REQUIRE(kept);
  CHECK(kept->bytes == "abcdef");
  CHECK(kept->save_id == "save-5");
  CHECK(replica.written(kept->slot)->bytes == "abcdef");
  // A failed fill leaves its slot incomplete; bytes that do not match the CRC they came with are
  // left out when read. Either way the step before stays in use.
  CHECK_THROWS_AS(replica.write_filled(
                      6, "save-6", 3, [](char*) { throw std::runtime_error("peer gone"); }, 0),
                  std::runtime_error);
  REQUIRE(replica.newest());
  CHECK(replica.newest()->step == 5);
  replica.write_filled(
      7, "save-7", 3, [](char* to) { std::memcpy(to, "xyz", 3); }, sent.crc32);
  REQUIRE(replica.newest());
  CHECK(replica.newest()->step == 5);
  const std::vector<dcpp::HeldSlots> held = MemorySlots::on_this_host(job);
  REQUIRE(held.size() == 2);
  CHECK((held[0].rank == 2 && held[0].holder == -1));
  CHECK((held[1].rank == 2 && held[1].holder == 0));
  CHECK_THROWS_WITH(MemorySlots(job, 2, 1, 2, 2), Catch::Contains("not by 2"));
  own.release();
  replica.release();
  CHECK(MemorySlots::on_this_host(job).empty());
}

TEST_CASE("memory slots refuse a step over their limit, and bad names, before touching a slot") {
  SlotsOfThisTest test("limit", 1000);
  write_step(test.slots, 1, bytes_of(1, 1000));
  const dcpp::CheckpointError over =
      dcpp::test::error_of([&] { write_step(test.slots, 2, bytes_of(2, 1001)); });
  CHECK(over.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(over.what(), Catch::Contains("rank 3, step 2: 1001 bytes exceed the memory tier's "
                                          "limit of 1000 per step"));
  CHECK(test.slots.newest()->step == 1);

  CHECK_THROWS_WITH(MemorySlots("a/b", 0, 1), Catch::Contains("the job name 'a/b' must be"));
  CHECK_THROWS_WITH(MemorySlots("", 0, 1), Catch::Contains("must be 1 to 128 letters"));
  CHECK_THROWS_WITH(MemorySlots("job", -1, 1), Catch::Contains("rank -1 is negative"));
}

TEST_CASE("a step of many chunks over uneven pieces, written again in place, reads back whole") {
  SlotsOfThisTest test("chunks", 64 << 20);
  // 21 MiB + 5 bytes in three pieces whose ends fall inside the 8 MiB copy chunks.
  std::string bytes = bytes_of(7, (21 << 20) + 5);
  const std::vector<BytePiece> pieces{BytePiece{bytes.data(), 3 << 20},
                                      BytePiece{bytes.data() + (3 << 20), 0},
                                      BytePiece{bytes.data() + (3 << 20), (13 << 20) + 1},
                                      BytePiece{bytes.data() + (16 << 20) + 1, (5 << 20) + 4}};
  for (int64_t step = 1; step <= 4; ++step) {  // slots 0, 1, 0, 1: each rewritten in place
    bytes[static_cast<std::size_t>(step) * 1000003] ^= 0x5a;
    INFO("step " << step);
    test.slots.write(step, "save", pieces);
    const auto newest = test.slots.newest();
    REQUIRE(newest.has_value());
    CHECK(newest->step == step);
    CHECK(newest->bytes == bytes);
  }
}
