// The corruption harness (docs/reliability.md, "Corruption"): saves a checkpoint from a few ranks,
// then damages it N times, each trial on an undamaged copy: one file drawn uniformly among the
// data files, `.metadata` and the checksum file, then one byte flipped (xor a random non-zero
// value) or the file truncated to a random shorter length. Each damage must be found by `dcpp
// verify` (run in process) and by a load of the whole checkpoint on the same ranks, in the layout
// it was saved from, with CRC checks on, each naming the file and, for an item's bytes, the key.
//
//   dcpp_corruption_harness [--trials N] [--seed S] [--ranks R] [--only T] [--by-region]
//                           [--format-only] [--verbose]
//
// --trials defaults to $DCPP_CORRUPTION_TRIALS, else 150. --seed defaults to a random seed, always
// printed: the same seed replays the same trials, and --only T replays trial T alone.
// --by-region draws the damaged byte uniformly within a region drawn uniformly among the file's
// regions (headers, padding, payloads, descriptors, directory, end records), rather than
// uniformly within the file, where payloads take nearly every trial.
// --format-only deletes the checksum file first, to measure what the format's own checks (zip
// CRC-32s and structure) find in a checkpoint written without one (as Python writes them); the
// exit status then reports crashes only. Exit status: 0 when every trial passed, 1 otherwise.

#include "byte_regions.h"
#include "corruption_checkpoint.h"
#include "corruption_tally.h"
#include "corruption_trial.h"
#include "rank_pool.h"
#include "verify/verify_command.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>

namespace fs = std::filesystem;
using namespace dcpp::corruption;

namespace {

struct Options {
  int64_t trials = 150;
  uint64_t seed = 0;
  bool seed_given = false;
  int ranks = 3;
  int64_t only = -1;
  bool by_region = false;
  bool format_only = false;
  bool verbose = false;
};

[[noreturn]] void usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--trials N] [--seed S] [--ranks R] [--only T] [--by-region] "
               "[--format-only] [--verbose]\n",
               program);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  if (const char* env = std::getenv("DCPP_CORRUPTION_TRIALS")) options.trials = std::atoll(env);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (arg == "--trials") {
      options.trials = std::stoll(value());
    } else if (arg == "--seed") {
      options.seed = std::stoull(value());
      options.seed_given = true;
    } else if (arg == "--ranks") {
      options.ranks = std::stoi(value());
    } else if (arg == "--only") {
      options.only = std::stoll(value());
    } else if (arg == "--by-region") {
      options.by_region = true;
    } else if (arg == "--format-only") {
      options.format_only = true;
    } else if (arg == "--verbose") {
      options.verbose = true;
    } else {
      usage(argv[0]);
    }
  }
  if (options.trials < 1 || options.ranks < 1 || options.only >= options.trials) usage(argv[0]);
  if (!options.seed_given)
    options.seed = std::random_device{}() * 0x100000001ULL ^ std::random_device{}();
  return options;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "dcpp-corruption-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The files of the saved checkpoint, each byte classified.
std::vector<TargetFile> target_files(const fs::path& checkpoint) {
  const dcpp::Metadata metadata = dcpp::read_metadata(checkpoint);
  std::map<std::string, std::vector<ItemPlace>> items;
  for (const auto& [index, info] : metadata.storage_data) {
    items[info.relative_path].push_back(ItemPlace{static_cast<uint64_t>(info.offset),
                                                  static_cast<uint64_t>(info.length), index.fqn});
  }
  std::vector<TargetFile> files;
  for (const auto& entry : fs::directory_iterator(checkpoint)) {
    const std::string name = entry.path().filename().string();
    TargetFile file{name, FileKind::kData, read_bytes(entry.path()), {}};
    const uint64_t size = file.pristine.size();
    if (name == ".metadata") {
      file.kind = FileKind::kMetadata;
      file.spans = {Span{0, size, Region::kMetadata, ""}};
    } else if (items.count(name) != 0) {
      file.spans = map_data_file(file.pristine, items[name]);
    } else {
      file.kind = FileKind::kChecksumFile;
      file.spans = {Span{0, size, Region::kChecksumFile, ""}};
    }
    files.push_back(std::move(file));
  }
  std::sort(files.begin(), files.end(),
            [](const TargetFile& a, const TargetFile& b) { return a.name < b.name; });
  return files;
}

// What one load of the whole checkpoint on every rank gave.
struct LoadOutcome {
  std::optional<std::string> error;  // the first rank's error message
  bool crashed = false;              // an exception other than CheckpointError
  bool intact = true;                // every rank loaded what was saved
  std::string difference;
};

LoadOutcome load_everywhere(RankPool& pool, const fs::path& checkpoint) {
  std::vector<std::string> differences(static_cast<std::size_t>(pool.size()));
  const auto errors = pool.run([&](int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
    dcpp::StateDict state = make_rank_state(rank, pool.size(), false);
    dcpp::LoadOptions options;
    options.ranks.process_group = group;
    options.file_system.verify_checksums = true;
    dcpp::load(state, checkpoint, options);
    std::string where;
    if (!same_state(state, make_rank_state(rank, pool.size(), true), where)) {
      differences[static_cast<std::size_t>(rank)] = where;
    }
  });
  LoadOutcome outcome;
  for (std::size_t rank = 0; rank < errors.size(); ++rank) {
    if (!differences[rank].empty()) {
      outcome.intact = false;
      outcome.difference = "rank " + std::to_string(rank) + ": " + differences[rank];
    }
    if (!errors[rank] || outcome.error) continue;
    try {
      std::rethrow_exception(errors[rank]);
    } catch (const dcpp::CheckpointError& e) {
      outcome.error = e.what_without_backtrace();
    } catch (const std::exception& e) {
      outcome.error = e.what();
      outcome.crashed = true;
    }
  }
  return outcome;
}

std::string describe(const TargetFile& file, const Corruption& c, const Expectation& e) {
  std::string text = std::string(damage_name(c.damage)) + " of " + file.name;
  text += c.damage == Damage::kFlip
              ? " at byte " + std::to_string(c.offset) + " (xor " + std::to_string(c.mask) + ")"
              : " to " + std::to_string(c.offset) + " of " + std::to_string(file.pristine.size()) +
                    " bytes";
  text += ", in " + std::string(region_name(e.region));
  if (e.key) text += " of '" + *e.key + "'";
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    const auto start = std::chrono::steady_clock::now();
    ScratchDir scratch;
    const fs::path checkpoint = scratch.path() / "ckpt";
    RankPool pool(options.ranks, "corruption");
    const auto saved = pool.run([&](int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
      dcpp::SaveOptions save_options;
      save_options.ranks.process_group = group;
      save_options.file_system.sync_files = false;
      dcpp::save(make_rank_state(rank, options.ranks, true), checkpoint, save_options);
    });
    for (const auto& error : saved) {
      if (error) std::rethrow_exception(error);
    }
    std::vector<TargetFile> files = target_files(checkpoint);
    if (options.format_only) {
      for (auto it = files.begin(); it != files.end();) {
        if (it->kind == FileKind::kChecksumFile) {
          fs::remove(checkpoint / it->name);
          it = files.erase(it);
        } else {
          ++it;
        }
      }
    }

    std::cout << "corruption harness: seed " << options.seed << ", " << options.trials
              << " trials, " << options.ranks << " ranks"
              << (options.by_region ? ", offsets drawn by region" : ", offsets drawn by file")
              << (options.format_only ? ", checksum file removed (format checks only)" : "")
              << "\nfiles:";
    for (const TargetFile& file : files) {
      std::cout << " " << file.name << " (" << file.pristine.size() << " B)";
    }
    std::cout << "\nreplay: " << argv[0] << " --seed " << options.seed << " --trials "
              << options.trials << " --ranks " << options.ranks
              << (options.by_region ? " --by-region" : "")
              << (options.format_only ? " --format-only" : "") << " [--only T]\n";

    // The undamaged checkpoint verifies and loads bit for bit.
    const nlohmann::json clean = dcpp::tools::verify_checkpoint(checkpoint);
    if (!clean["ok"].get<bool>())
      throw std::runtime_error(
          "the undamaged checkpoint fails verify: " +
          clean.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    const LoadOutcome clean_load = load_everywhere(pool, checkpoint);
    if (clean_load.error || !clean_load.intact) {
      throw std::runtime_error("the undamaged checkpoint does not load back: " +
                               clean_load.error.value_or(clean_load.difference));
    }

    Tally tally;
    int failures = 0;
    int shown = 0;
    for (int64_t trial = 0; trial < options.trials; ++trial) {
      if (options.only >= 0 && trial != options.only) continue;
      const Corruption c =
          draw_corruption(options.seed, static_cast<uint64_t>(trial), files, options.by_region);
      const TargetFile& file = files[c.file];
      const Expectation expected = expectation_for(file, c);
      write_bytes(checkpoint / file.name, damaged_bytes(file, c));

      Verdict verify;
      bool crashed = false;
      try {
        verify = judge_verify(dcpp::tools::verify_checkpoint(checkpoint), expected);
      } catch (const std::exception& e) {
        crashed = true;
        verify.detail = std::string("verify threw: ") + e.what();
      }
      const LoadOutcome loaded = load_everywhere(pool, checkpoint);
      const Verdict load =
          judge_load(loaded.error, loaded.crashed, loaded.intact, checkpoint, expected);
      crashed = crashed || loaded.crashed;
      write_bytes(checkpoint / file.name, file.pristine);

      const bool passed = verify.named && load.named && !crashed;
      tally.add("file kind", file_kind_name(file.kind), verify.detected, verify.named,
                load.detected, load.named, crashed);
      tally.add("damage", damage_name(c.damage), verify.detected, verify.named, load.detected,
                load.named, crashed);
      tally.add("region", region_name(expected.region), verify.detected, verify.named,
                load.detected, load.named, crashed);
      failures += !passed;
      if (options.verbose || (!passed && shown < 40)) {
        shown += !passed;
        std::cout << (passed ? "ok    " : "MISSED") << " trial " << trial << ": "
                  << describe(file, c, expected) << "\n         verify: " << verify.detail
                  << "\n         load: " << load.detail << "\n";
      }
    }
    tally.print(std::cout);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "\n"
              << tally.total().trials << " trials in " << seconds << " s; " << failures
              << " not detected and named by both verify and load; " << tally.total().crashes
              << " crashes (seed " << options.seed << ")\n";
    if (tally.total().crashes > 0) return 1;
    return options.format_only || failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "corruption harness failed (seed " << options.seed << "): " << e.what() << "\n";
    return 1;
  }
}
