// The `dcpp` command line: look into, check and convert checkpoints.

#include "convert_command.h"
#include "diff_command.h"
#include "inspect_command.h"
#include "verify_command.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/version.h>

#include <CLI/CLI.hpp>

#include <iostream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

// One line: error messages may carry newlines from nested causes.
std::string one_line(std::string message) {
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return message;
}

}  // namespace

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // The commands stream one tensor at a time and promise memory of about two tensors, so a freed
  // tensor must go back to the system. glibc raises its mmap threshold to the size of each freed
  // mapped block (up to 32 MiB); later tensors then come from the heap, whose top one small
  // allocation can pin, and the peak grows with the allocation order. A fixed threshold keeps
  // every block of 1 MiB or more mapped, and unmapped when freed.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  CLI::App app("dcpp: PyTorch distributed checkpoints from C++", "dcpp");
  app.set_version_flag("--version", "dcpp " DCPP_VERSION);
  app.require_subcommand(1);
  dcpp::tools::add_inspect_command(app);
  dcpp::tools::add_verify_command(app);
  dcpp::tools::add_convert_command(app);
  dcpp::tools::add_diff_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const c10::Error& error) {
    const std::string command = app.get_subcommands().empty()
                                    ? "dcpp"
                                    : "dcpp " + app.get_subcommands().front()->get_name();
    std::cerr << command << ": " << one_line(error.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "dcpp: " << one_line(error.what()) << "\n";
    return 1;
  }
  return 0;
}
