// The reduced form of a fuzz target that `make test` runs, with any compiler and no libFuzzer:
// feeds LLVMFuzzerTestOneInput every seed of the corpus as it is, then a fixed stream of mutated
// seeds drawn from a seeded generator (the same inputs on every machine and every run).
//
//   <target>_replay [--iterations N] [--seed S] [--only I] [--save I FILE] PATH...
//
// PATHs are corpus directories (every file in them, by name order) or single files; with no
// --iterations only the files themselves run, which replays a crash file libFuzzer wrote.
// Mutations: byte flips and overwrites, "interesting" integers (0, -1, 2^31-1, ...) written over
// 1, 2, 4 or 8 bytes, truncations, erased ranges, inserted random bytes, duplicated ranges, and
// splices of two seeds; one to four per input.
//
// The target must return normally: an exception escaping it (anything but CheckpointError, which
// targets catch) is a failure. Failures exit 1 after writing the input to
// `<target>-failure-<I>.bin` in the working directory; a crash (a signal, or a sanitizer's report)
// writes the input there first. `--only I` runs mutation I alone, `--save I FILE` writes it.

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

/// SplitMix64: a tiny generator whose stream is the same with every standard library.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform enough in [0, n) for n > 0.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  uint64_t state_;
};

/// Writes a mutated copy of `seeds[...]` for mutation `index` of a run seeded with `seed`: each
/// mutation has its own generator, so that any one can be rebuilt alone.
std::string mutate(const std::vector<std::string>& seeds, uint64_t seed, uint64_t index) {
  Random random(seed * 0x100000001b3ULL + index);
  std::string input = seeds[random.below(seeds.size())];
  static constexpr uint64_t kInteresting[] = {0,
                                              1,
                                              0x7f,
                                              0x80,
                                              0xff,
                                              0x7fff,
                                              0x8000,
                                              0xffff,
                                              0x7fffffff,
                                              0x80000000,
                                              0xffffffff,
                                              ~uint64_t{0},
                                              uint64_t{1} << 32,
                                              (uint64_t{1} << 63) - 1};
  const int edits = 1 + static_cast<int>(random.below(4));
  for (int e = 0; e < edits; ++e) {
    const std::size_t size = input.size();
    const std::size_t at = size == 0 ? 0 : random.below(size);
    switch (random.below(8)) {
      case 0:  // flip one bit
        if (size > 0) input[at] = static_cast<char>(input[at] ^ (1 << random.below(8)));
        break;
      case 1:  // overwrite a byte
        if (size > 0) input[at] = static_cast<char>(random.next());
        break;
      case 2: {  // an interesting integer, little-endian, over 1, 2, 4 or 8 bytes
        const std::size_t width = std::size_t{1} << random.below(4);
        const uint64_t value = kInteresting[random.below(std::size(kInteresting))];
        for (std::size_t b = 0; b < width && at + b < size; ++b) {
          input[at + b] = static_cast<char>(value >> (8 * b));
        }
        break;
      }
      case 3:  // truncate
        input.resize(at);
        break;
      case 4:  // erase a range
        input.erase(at, 1 + random.below(16));
        break;
      case 5: {  // insert random bytes
        const std::size_t n = 1 + random.below(8);
        std::string bytes(n, '\0');
        for (char& c : bytes) c = static_cast<char>(random.next());
        input.insert(at, bytes);
        break;
      }
      case 6:  // duplicate a range
        if (size > 0) input.insert(at, input.substr(random.below(size), 1 + random.below(32)));
        break;
      default: {  // splice: this input's head, another seed's tail
        const std::string& other = seeds[random.below(seeds.size())];
        const std::size_t from = other.empty() ? 0 : random.below(other.size());
        input = input.substr(0, at) + other.substr(from);
        break;
      }
    }
  }
  return input;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The input being run, for the crash handlers (which may only make async-signal-safe calls).
const std::string* g_input = nullptr;
char g_crash_file[256] = "";

void save_current_input() {
  if (g_input == nullptr || g_crash_file[0] == '\0') return;
  const int fd = open(g_crash_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  const char* p = g_input->data();
  std::size_t left = g_input->size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  close(fd);
  static const char kNote[] = "replay: the crashing input is in ";
  [[maybe_unused]] ssize_t ignored = write(2, kNote, sizeof kNote - 1);
  ignored = write(2, g_crash_file, std::strlen(g_crash_file));
  ignored = write(2, "\n", 1);
}

void on_fatal_signal(int signal) {
  save_current_input();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

// Sanitizers call this before they exit on a report (a weak hook: absent without sanitizers).
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

std::string g_target_name;

/// Runs one input; on an escaping exception, saves it and exits 1.
void run(const std::string& input, const std::string& label, const std::string& id) {
  g_input = &input;
  std::snprintf(g_crash_file, sizeof g_crash_file, "%s-failure-%s.bin", g_target_name.c_str(),
                id.c_str());
  try {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  } catch (const std::exception& error) {
    save_current_input();
    std::cerr << "replay: " << label << " threw "
              << (dynamic_cast<const dcpp::CheckpointError*>(&error)
                      ? "a CheckpointError the target let escape"
                      : "an exception other than CheckpointError")
              << ": " << error.what() << "\n";
    std::exit(1);
  } catch (...) {
    save_current_input();
    std::cerr << "replay: " << label << " threw a non-standard exception\n";
    std::exit(1);
  }
  g_input = nullptr;
}

[[noreturn]] void usage(const char* program) {
  std::cerr << "usage: " << program
            << " [--iterations N] [--seed S] [--only I] [--save I FILE] PATH...\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  g_target_name = fs::path(argv[0]).filename().string();
  uint64_t iterations = 0;
  uint64_t seed = 1;
  std::optional<uint64_t> only;
  std::optional<uint64_t> save;
  fs::path save_to;
  std::vector<fs::path> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto number = [&]() -> uint64_t {
      if (i + 1 >= argc) usage(argv[0]);
      return std::strtoull(argv[++i], nullptr, 10);
    };
    if (arg == "--iterations") {
      iterations = number();
    } else if (arg == "--seed") {
      seed = number();
    } else if (arg == "--only") {
      only = number();
    } else if (arg == "--save") {
      save = number();
      if (i + 1 >= argc) usage(argv[0]);
      save_to = argv[++i];
    } else if (!arg.empty() && arg[0] == '-') {
      usage(argv[0]);
    } else {
      paths.emplace_back(arg);
    }
  }
  std::vector<fs::path> files;
  for (const fs::path& path : paths) {
    if (fs::is_directory(path)) {
      for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (fs::is_regular_file(path)) {
      files.push_back(path);
    } else {
      std::cerr << "replay: " << path << " is neither a file nor a directory\n";
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> seeds;
  for (const fs::path& file : files) seeds.push_back(read_bytes(file));
  if (seeds.empty()) {
    std::cerr << "replay: no inputs in the paths given\n";
    return 2;
  }
  if (save) {
    write_bytes(save_to, mutate(seeds, seed, *save));
    return 0;
  }

  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    std::signal(signal, on_fatal_signal);
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(save_current_input);

  const auto start = std::chrono::steady_clock::now();
  if (only) {
    run(mutate(seeds, seed, *only), "mutation " + std::to_string(*only), std::to_string(*only));
    std::cout << "replay: mutation " << *only << " of seed " << seed << " ran cleanly\n";
    return 0;
  }
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    run(seeds[i], "input " + files[i].string(), "input-" + std::to_string(i));
  }
  for (uint64_t i = 0; i < iterations; ++i) {
    run(mutate(seeds, seed, i),
        "mutation " + std::to_string(i) + " (--seed " + std::to_string(seed) + " --only " +
            std::to_string(i) + ")",
        std::to_string(i));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "replay: " << seeds.size() << " inputs and " << iterations << " mutations (seed "
            << seed << ") ran cleanly in " << seconds << " s\n";
  return 0;
}
