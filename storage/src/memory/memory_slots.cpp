#include <dcpp/storage/memory_slots.h>

#include "core/tbb_parallel.h"
#include "core/tsan_annotations.h"
#include "format/crc32.h"

#include <dcpp/core/checkpoint_error.h>

#include <oneapi/tbb/task_arena.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

namespace dcpp {
using detail::crc32;
using detail::crc32_combine;
using detail::crc32_copy;

namespace {

constexpr char kMagic[8] = {'D', 'C', 'P', 'P', 'M', 'E', 'M', '1'};
constexpr uint32_t kEmpty = 0, kBeingWritten = 1, kComplete = 2;
constexpr std::size_t kHeaderBytes = 4096;  // the bytes start on a page of their own
constexpr std::size_t kSaveIdBytes = 64;
// madvise(2)'s MADV_POPULATE_READ (Linux 5.14), where the C library does not name it yet; an older
// kernel refuses it (EINVAL), and the pages are then faulted in as they are read.
#ifdef MADV_POPULATE_READ
constexpr int kPopulateRead = MADV_POPULATE_READ;
#else
constexpr int kPopulateRead = 22;
#endif
// madvise(2)'s MADV_COLLAPSE (Linux 6.1), likewise; an older kernel refuses it (EINVAL).
#ifdef MADV_COLLAPSE
constexpr int kCollapse = MADV_COLLAPSE;
#else
constexpr int kCollapse = 25;
#endif
constexpr std::size_t kHugePage = 2 << 20;  // a PMD's worth on x86-64 and arm64 with 4 KiB pages

// The first bytes of a region. `state` is written last (release) and read first (acquire).
struct SlotHeader {
  char magic[8];
  uint32_t state;
  uint32_t crc32;
  int64_t step;
  uint64_t bytes;
  uint32_t save_id_size;
  char save_id[kSaveIdBytes];
};
static_assert(sizeof(SlotHeader) <= kHeaderBytes);

std::string errno_text(int error) { return std::strerror(error); }

// mmap(2) of `fd` from its start, at an address that is a multiple of kHugePage when `bytes` is
// at least that: a huge page of the file is then mapped by one PMD entry instead of 512 PTEs (a
// new process reading a 1 GiB region takes 512 faults, not 262,144). MAP_FAILED (errno) on failure.
void* map_at_huge_boundary(std::size_t bytes, int protection, int flags, int fd) {
  if (bytes < kHugePage) return ::mmap(nullptr, bytes, protection, flags, fd, 0);
  // Reserve a span a huge page longer, map the file over its first boundary, return the rest.
  void* span = ::mmap(nullptr, bytes + kHugePage, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (span == MAP_FAILED) return MAP_FAILED;
  char* const first = static_cast<char*>(span);
  char* const aligned = reinterpret_cast<char*>(
      (reinterpret_cast<uintptr_t>(first) + kHugePage - 1) & ~uintptr_t{kHugePage - 1});
  void* at = ::mmap(aligned, bytes, protection, flags | MAP_FIXED, fd, 0);
  if (at == MAP_FAILED) {
    const int error = errno;
    ::munmap(first, bytes + kHugePage);
    errno = error;
    return MAP_FAILED;
  }
  if (aligned != first) ::munmap(first, static_cast<std::size_t>(aligned - first));
  char* const end = aligned + bytes;
  if (end != first + bytes + kHugePage) {
    ::munmap(end, static_cast<std::size_t>(first + bytes + kHugePage - end));
  }
  return at;
}

// Asks the kernel to back the whole huge pages of a region's mapping `at` (kHugePage-aligned,
// `bytes` long) with huge pages (MADV_COLLAPSE: a tmpfs mounted without huge= still keeps them),
// so that a reader maps them with 512 times fewer faults. Only advice: refused by a kernel before
// 6.1, by THP set to "deny", or for want of contiguous memory, the pages stay 4 KiB and all works
// as before. Costs a copy of the pages once per region made; on the 2-core VM the first write's
// fill of 1 GiB then takes 46 ms instead of 2.8 s of page faults (docs/performance.md).
void prefer_huge_pages(char* at, std::size_t bytes) {
  if (bytes >= kHugePage) ::madvise(at, bytes & ~(kHugePage - 1), kCollapse);
}

// A file descriptor and a mapping, released on scope exit.
class Region {
 public:
  Region(const std::string& name, bool writable) : name_(name) {
    fd_ = ::shm_open(name.c_str(), writable ? O_RDWR | O_CREAT : O_RDONLY, 0600);
    if (fd_ < 0) error_ = errno;
  }
  ~Region() {
    unmap();
    if (fd_ >= 0) ::close(fd_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  bool open() const { return fd_ >= 0; }
  int error() const { return error_; }
  int fd() const { return fd_; }

  int64_t size() const {
    struct stat status {};
    return ::fstat(fd_, &status) == 0 ? static_cast<int64_t>(status.st_size) : -1;
  }
  // Maps the first `bytes` of the region; nullptr (errno in error()) on failure. `populate`:
  // with its page tables filled now, in one go (a region read whole, where a fault per 4 KiB page
  // would cost more than the reading). A mapping of 2 MiB or more starts on a 2 MiB boundary, so
  // that the region's huge pages (prefer_huge_pages) are mapped whole, one page-table entry each.
  char* map(std::size_t bytes, bool writable, bool populate = false) {
    unmap();
    void* at = map_at_huge_boundary(bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                                    MAP_SHARED | (populate ? MAP_POPULATE : 0), fd_);
    if (at == MAP_FAILED) {
      error_ = errno;
      return nullptr;
    }
    mapped_ = static_cast<char*>(at);
    mapped_bytes_ = bytes;
    return mapped_;
  }
  void unmap() {
    if (mapped_ != nullptr) ::munmap(mapped_, mapped_bytes_);
    mapped_ = nullptr;
  }
  char* mapped() const { return mapped_; }

 private:
  std::string name_;
  int fd_ = -1;
  int error_ = 0;
  char* mapped_ = nullptr;
  std::size_t mapped_bytes_ = 0;
};

SlotHeader* header_of(char* region) { return reinterpret_cast<SlotHeader*>(region); }

uint32_t state_of(const SlotHeader& header) {
  return __atomic_load_n(&header.state, __ATOMIC_ACQUIRE);
}

// The header of a region, if it has a whole one with dcpp's magic.
std::optional<SlotHeader> read_header(const std::string& name) {
  Region region(name, /*writable=*/false);
  if (!region.open() || region.size() < static_cast<int64_t>(kHeaderBytes)) return std::nullopt;
  const char* at = region.map(kHeaderBytes, /*writable=*/false);
  if (at == nullptr) return std::nullopt;
  SlotHeader header;
  std::memcpy(&header, at, sizeof header);
  header.state = state_of(*reinterpret_cast<const SlotHeader*>(at));
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) return std::nullopt;
  return header;
}

constexpr uint64_t kCrcChunk = 8 << 20;  // the bytes each thread's CRC covers at a time

// The CRC-32 of `bytes` bytes from the CRC-32s of their kCrcChunk-byte chunks, in order.
uint32_t combined_crc(const std::vector<uint32_t>& crcs, uint64_t bytes) {
  uint32_t crc = 0;
  for (std::size_t chunk = 0; chunk < crcs.size(); ++chunk) {
    const uint64_t length = std::min(bytes, (chunk + 1) * kCrcChunk) - chunk * kCrcChunk;
    crc = chunk == 0 ? crcs[0] : crc32_combine(crc, crcs[chunk], length);
  }
  return crc;
}

// A step's copy into its slot: `pieces`, laid end to end, to `to` (`bytes` in all), in chunks of
// kCrcChunk bytes, each chunk's CRC-32 into `crcs`.
struct CopyJob {
  const std::vector<BytePiece>& pieces;
  char* to;
  uint64_t bytes;
  std::vector<uint32_t> crcs;
};

void copy_chunk(CopyJob& job, std::size_t chunk) {
  uint64_t begin = chunk * kCrcChunk;
  const uint64_t end = std::min(job.bytes, begin + kCrcChunk);
  // The piece holding `begin`, and where in it.
  std::size_t piece = 0;
  uint64_t piece_start = 0;
  while (piece_start + job.pieces[piece].size <= begin) piece_start += job.pieces[piece++].size;
  uint32_t crc = 0;
  while (begin < end) {
    const uint64_t in_piece = begin - piece_start;
    const uint64_t n = std::min<uint64_t>(end - begin, job.pieces[piece].size - in_piece);
    // One read of the state; the slot is written around the cache (nothing reads it soon).
    crc =
        crc32_copy(crc, job.to + begin, static_cast<const char*>(job.pieces[piece].data) + in_piece,
                   static_cast<std::size_t>(n));
    begin += n;
    if (in_piece + n == job.pieces[piece].size) piece_start += job.pieces[piece++].size;
  }
  job.crcs[chunk] = crc;
}

// Copies the chunks [begin, end) of a CopyJob; runs on TBB threads (through the uninstrumented
// core/src/tbb_parallel.cpp), so it annotates what TBB's hand-offs guarantee. Never throws.
void copy_chunks(void* context, std::size_t begin, std::size_t end) {
  auto& job = *static_cast<CopyJob*>(context);
  DCPP_HAPPENS_AFTER(&job);
  for (std::size_t chunk = begin; chunk != end; ++chunk) copy_chunk(job, chunk);
  DCPP_HAPPENS_BEFORE(&job);
}

// Copies `pieces` to `to` (`bytes` in all), its chunks spread over `arena`'s threads (null: on
// this thread alone), and returns the CRC-32 of the bytes copied (each chunk's, combined in order).
uint32_t copy_with_crc(const std::vector<BytePiece>& pieces, char* to, uint64_t bytes,
                       tbb::task_arena* arena) {
  const std::size_t chunks = static_cast<std::size_t>((bytes + kCrcChunk - 1) / kCrcChunk);
  CopyJob job{pieces, to, bytes, std::vector<uint32_t>(chunks, 0)};
  if (arena == nullptr || chunks < 2) {
    for (std::size_t chunk = 0; chunk < chunks; ++chunk) copy_chunk(job, chunk);
  } else {
    DCPP_HAPPENS_BEFORE(&job);
    detail::parallel_for_in_arena(*arena, chunks, &copy_chunks, &job);
    DCPP_HAPPENS_AFTER(&job);
  }
  return combined_crc(job.crcs, bytes);
}

std::string free_bytes_of_shm() {
  struct statvfs status {};
  if (::statvfs("/dev/shm", &status) != 0) return "unknown";
  return std::to_string(static_cast<uint64_t>(status.f_bavail) * status.f_frsize);
}

}  // namespace

// The TBB task arena a step's copy runs in: `threads` slots, one kept for the thread that writes.
struct MemorySlots::CopyArena {
  explicit CopyArena(int threads) : arena(threads, /*reserved_for_masters=*/1) {}
  tbb::task_arena arena;
};

struct MemorySlots::Mapping {
  explicit Mapping(const std::string& name) : region(name, /*writable=*/true) {}
  Region region;
};

MemorySlots::MemorySlots(std::string job, int rank, int64_t max_bytes, int threads, int holder)
    : job_(std::move(job)), rank_(rank), holder_(holder), max_bytes_(max_bytes), threads_(threads) {
  const bool name_ok =
      !job_.empty() && job_.size() <= 128 && std::all_of(job_.begin(), job_.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
      });
  if (!name_ok) {
    throw CheckpointError(ErrorKind::kUsage, "memory tier: the job name '" + job_ +
                                                 "' must be 1 to 128 letters, digits, '-' or '_'");
  }
  if (rank_ < 0) {
    throw CheckpointError(ErrorKind::kUsage,
                          "memory tier: rank " + std::to_string(rank_) + " is negative");
  }
  if (holder_ < -1 || holder_ == rank_) {
    throw CheckpointError(ErrorKind::kUsage,
                          "memory tier: a replica of rank " + std::to_string(rank_) +
                              "'s steps is kept by another rank, not by " +
                              std::to_string(holder_) + " (-1: the rank's own slots)");
  }
}

int64_t MemorySlots::region_bytes(int64_t step_bytes) {
  constexpr int64_t kGrain = 64 << 10;
  const int64_t total = static_cast<int64_t>(kHeaderBytes) + step_bytes;
  return (total + total / 16 + kGrain - 1) / kGrain * kGrain;
}

std::string MemorySlots::region_name(int slot) const {
  return "/dcpp." + job_ + "." + std::to_string(rank_) + "." +
         (holder_ < 0 ? "" : "at" + std::to_string(holder_) + ".") + std::to_string(slot);
}

int MemorySlots::write(int64_t step, const std::string& save_id,
                       const std::vector<BytePiece>& pieces) {
  uint64_t bytes = 0;
  for (const BytePiece& piece : pieces) bytes += piece.size;
  int slot = -1;
  char* to = begin_write(step, save_id, bytes, &slot);
  if (threads_ > 1 && !copy_arena_) copy_arena_ = std::make_unique<CopyArena>(threads_);
  const uint32_t crc =
      copy_with_crc(pieces, to, bytes, copy_arena_ ? &copy_arena_->arena : nullptr);
  end_write(slot, step, save_id, bytes, crc);
  return slot;
}

int MemorySlots::write_filled(int64_t step, const std::string& save_id, uint64_t bytes,
                              const std::function<void(char*)>& fill, uint32_t crc32_of_bytes) {
  int slot = -1;
  char* to = begin_write(step, save_id, bytes, &slot);
  fill(to);
  end_write(slot, step, save_id, bytes, crc32_of_bytes);
  return slot;
}

char* MemorySlots::begin_write(int64_t step, const std::string& save_id, uint64_t bytes,
                               int* slot_written) {
  // The errors' subject, made only for an error: a loop that saves every step pays for no string.
  const auto subject = [&] {
    return (holder_ < 0 ? "memory tier, rank " + std::to_string(rank_)
                        : "memory tier, rank " + std::to_string(holder_) + "'s replica of rank " +
                              std::to_string(rank_)) +
           ", step " + std::to_string(step);
  };
  if (static_cast<int64_t>(bytes) > max_bytes_) {
    const std::string what = subject();
    throw CheckpointError(ErrorKind::kUsage,
                          what + ": " + std::to_string(bytes) +
                              " bytes exceed the memory tier's limit of " +
                              std::to_string(max_bytes_) +
                              " per step; raise it (MemoryTierOptions::max_bytes_per_rank), or "
                              "keep less state in memory");
  }
  if (save_id.size() > kSaveIdBytes) {
    const std::string what = subject();
    throw CheckpointError(ErrorKind::kUsage,
                          what + ": the save identity '" + save_id + "' is longer than 64 bytes");
  }
  // Never the slot this object completed last; before that, never the kept step's; else the
  // older step's: read from the regions once, then known (this process is their only writer).
  if (!slots_known_) {
    for (int slot = 0; slot < 2; ++slot) {
      const std::optional<SlotHeader> header = read_header(region_name(slot));
      complete_step_[slot] =
          header && header->state == kComplete ? header->step : std::numeric_limits<int64_t>::min();
    }
    slots_known_ = true;
  }
  int slot = complete_step_[0] > complete_step_[1] ? 1 : 0;
  if (kept_) {
    for (int held = 0; held < 2; ++held) {
      const std::optional<SlotHeader> header = read_header(region_name(held));
      if (header && header->state == kComplete && header->step == kept_->first &&
          std::string(header->save_id, std::min<std::size_t>(header->save_id_size, kSaveIdBytes)) ==
              kept_->second) {
        slot = 1 - held;
      }
    }
  } else if (last_written_ >= 0) {
    slot = 1 - last_written_;
  }
  const std::string name = region_name(slot);
  complete_step_[slot] = std::numeric_limits<int64_t>::min();  // until this write completes
  written_[slot] = false;

  // The slot's mapping from the last write into it, when the step fits and takes more than half
  // of it. A new region has room for a step a 16th larger, in whole 64 KiB: the steps of a loop
  // differ by a few bytes of their manifest, and are written into the same pages.
  const std::size_t total = kHeaderBytes + bytes;
  std::unique_ptr<Mapping>& mapping = mapped_[slot];
  const int64_t mapped_size = mapping ? mapping->region.size() : 0;
  if (!mapping || mapped_size < static_cast<int64_t>(total) ||
      static_cast<int64_t>(total) * 2 <= mapped_size) {
    const std::string what = subject();
    mapping.reset();
    mapping = std::make_unique<Mapping>(name);
    Region& region = mapping->region;
    if (!region.open()) {
      throw CheckpointError(ErrorKind::kIo, what + ": cannot open shared memory " + name + ": " +
                                                errno_text(region.error()));
    }
    // Marked as being written before anything else changes, so no reader takes it meanwhile.
    if (region.size() >= static_cast<int64_t>(kHeaderBytes)) {
      char* at = region.map(kHeaderBytes, /*writable=*/true);
      if (at != nullptr) __atomic_store_n(&header_of(at)->state, kBeingWritten, __ATOMIC_RELEASE);
    }
    const auto capacity = static_cast<std::size_t>(region_bytes(static_cast<int64_t>(bytes)));
    if (::ftruncate(region.fd(), static_cast<off_t>(capacity)) != 0) {
      throw CheckpointError(ErrorKind::kIo, what + ": cannot size shared memory " + name + " to " +
                                                std::to_string(capacity) +
                                                " bytes: " + errno_text(errno));
    }
    // Reserve every page now: a tmpfs out of room would kill the writer with SIGBUS mid-copy.
    if (const int error = ::posix_fallocate(region.fd(), 0, static_cast<off_t>(capacity))) {
      mapping.reset();
      throw CheckpointError(ErrorKind::kIo, what + ": /dev/shm has no room for " + name + " (" +
                                                std::to_string(capacity) + " bytes asked, " +
                                                free_bytes_of_shm() +
                                                " free): " + errno_text(error) +
                                                "; give /dev/shm more room or keep less in memory");
    }
    if (region.map(capacity, /*writable=*/true) == nullptr) {
      const int error = region.error();
      mapping.reset();
      throw CheckpointError(ErrorKind::kIo,
                            what + ": cannot map shared memory " + name + ": " + errno_text(error));
    }
    prefer_huge_pages(region.mapped(), capacity);
  }
  char* at = mapping->region.mapped();
  SlotHeader* header = header_of(at);
  __atomic_store_n(&header->state, kBeingWritten, __ATOMIC_RELEASE);
  std::memcpy(header->magic, kMagic, sizeof kMagic);
  *slot_written = slot;
  return at + kHeaderBytes;
}

void MemorySlots::end_write(int slot, int64_t step, const std::string& save_id, uint64_t bytes,
                            uint32_t crc) {
  SlotHeader* header = header_of(mapped_[slot]->region.mapped());
  header->crc32 = crc;
  header->step = step;
  header->bytes = bytes;
  header->save_id_size = static_cast<uint32_t>(save_id.size());
  std::memset(header->save_id, 0, kSaveIdBytes);
  std::memcpy(header->save_id, save_id.data(), save_id.size());
  __atomic_store_n(&header->state, kComplete, __ATOMIC_RELEASE);
  complete_step_[slot] = step;
  written_[slot] = true;
  last_written_ = slot;
  kept_.reset();
}

void MemorySlots::keep(int64_t step, const std::string& save_id) { kept_.emplace(step, save_id); }

std::optional<MemoryStep> MemorySlots::written(int slot) const {
  if (slot < 0 || slot > 1 || !written_[slot] || !mapped_[slot]) return std::nullopt;
  const char* at = mapped_[slot]->region.mapped();
  const SlotHeader& header = *reinterpret_cast<const SlotHeader*>(at);
  return MemoryStep{header.step,
                    std::string(header.save_id, header.save_id_size),
                    slot,
                    region_name(slot),
                    std::string_view(at + kHeaderBytes, static_cast<std::size_t>(header.bytes)),
                    nullptr,
                    header.crc32};
}

std::vector<HeldSlots> MemorySlots::on_this_host(const std::string& job) {
  // "dcpp.<job>.<rank>.<slot>" or "dcpp.<job>.<rank>.at<holder>.<slot>"
  const std::string prefix = "dcpp." + job + ".";
  std::vector<HeldSlots> held;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    int rank = -1, holder = -1, slot = -1, used = 0;
    if (std::sscanf(rest.c_str(), "%d.at%d.%d%n", &rank, &holder, &slot, &used) == 3 &&
        used == static_cast<int>(rest.size())) {
    } else if (holder = -1, used = 0;
               std::sscanf(rest.c_str(), "%d.%d%n", &rank, &slot, &used) == 2 &&
               used == static_cast<int>(rest.size())) {
    } else {
      continue;
    }
    if (rank < 0 || (slot != 0 && slot != 1)) continue;
    const bool known = std::any_of(held.begin(), held.end(), [&](const HeldSlots& h) {
      return h.rank == rank && h.holder == holder;
    });
    if (!known) held.push_back(HeldSlots{rank, holder});
  }
  std::sort(held.begin(), held.end(), [](const HeldSlots& a, const HeldSlots& b) {
    return std::make_pair(a.rank, a.holder) < std::make_pair(b.rank, b.holder);
  });
  return held;
}

std::vector<MemoryStep> MemorySlots::complete_steps(std::vector<std::string>* problems) const {
  return steps(problems, /*check_crc=*/true);
}

std::vector<MemoryStep> MemorySlots::complete_steps_unchecked(
    std::vector<std::string>* problems) const {
  return steps(problems, /*check_crc=*/false);
}

bool MemorySlots::crc_matches(const MemoryStep& step) {
  // The pages' tables filled in one go (a fault per 4 KiB page would cost more than the CRC).
  ::madvise(const_cast<char*>(step.bytes.data()), step.bytes.size(), kPopulateRead);
  return crc32(0, step.bytes.data(), step.bytes.size()) == step.crc32;
}

std::vector<MemoryStep> MemorySlots::steps(std::vector<std::string>* problems,
                                           bool check_crc) const {
  const auto problem = [&](const std::string& text) {
    if (problems != nullptr) problems->push_back(text);
  };
  std::vector<MemoryStep> steps;
  for (int slot = 0; slot < 2; ++slot) {
    const std::string name = region_name(slot);
    auto region = std::make_shared<Region>(name, /*writable=*/false);
    if (!region->open()) continue;  // never written
    const int64_t size = region->size();
    if (size < static_cast<int64_t>(kHeaderBytes)) {
      if (size > 0) problem(name + ": torn (" + std::to_string(size) + " bytes, no whole header)");
      continue;
    }
    const char* at =
        region->map(static_cast<std::size_t>(size), /*writable=*/false, /*populate=*/check_crc);
    if (at == nullptr) {
      problem(name + ": cannot be mapped: " + errno_text(region->error()));
      continue;
    }
    SlotHeader header;
    std::memcpy(&header, at, sizeof header);
    header.state = state_of(*reinterpret_cast<const SlotHeader*>(at));
    if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) {
      if (header.state != kEmpty) problem(name + ": not a dcpp memory slot");
      continue;
    }
    if (header.state != kComplete) {
      problem(name + ": a write of it did not finish");
      continue;
    }
    if (header.bytes > static_cast<uint64_t>(size) - kHeaderBytes ||
        header.save_id_size > kSaveIdBytes) {
      problem(name + ": torn (its header names " + std::to_string(header.bytes) +
              " bytes; the region holds " + std::to_string(size - kHeaderBytes) + ")");
      continue;
    }
    if (check_crc &&
        crc32(0, at + kHeaderBytes, static_cast<std::size_t>(header.bytes)) != header.crc32) {
      problem(name + ": corrupted (step " + std::to_string(header.step) +
              ": its bytes' CRC-32 does not match its header's)");
      continue;
    }
    steps.push_back(
        MemoryStep{header.step, std::string(header.save_id, header.save_id_size), slot, name,
                   std::string_view(at + kHeaderBytes, static_cast<std::size_t>(header.bytes)),
                   std::move(region), header.crc32});
  }
  std::sort(steps.begin(), steps.end(),
            [](const MemoryStep& a, const MemoryStep& b) { return a.step > b.step; });
  return steps;
}

std::optional<MemoryStep> MemorySlots::newest(std::vector<std::string>* problems) const {
  std::vector<MemoryStep> steps = complete_steps(problems);
  if (steps.empty()) return std::nullopt;
  return std::move(steps.front());
}

MemorySlots::~MemorySlots() = default;

void MemorySlots::release() {
  slots_known_ = false;
  for (int slot = 0; slot < 2; ++slot) {
    mapped_[slot].reset();
    written_[slot] = false;
    ::shm_unlink(region_name(slot).c_str());
  }
}

}  // namespace dcpp
