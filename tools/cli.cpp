// The `dcpp` command line's commands and error reporting (cli.h).

#include "cli.h"

#include "convert/convert_command.h"
#include "diff/diff_command.h"
#include "flush/flush_command.h"
#include "inspect/inspect_command.h"
#include "verify/verify_command.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/version.h>

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

namespace dcpp::tools {
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

int run_cli(int argc, char** argv) {
  CLI::App app("dcpp: PyTorch distributed checkpoints from C++", "dcpp");
  app.set_version_flag("--version", "dcpp " DCPP_VERSION);
  app.require_subcommand(1);
  add_inspect_command(app);
  add_verify_command(app);
  add_convert_command(app);
  add_diff_command(app);
  add_flush_memory_command(app);
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

}  // namespace dcpp::tools
