#pragma once
// The `dcpp` command line as a function: what its main() runs, and what the command-line tests
// run in their own process (tests/tools/tools_test_util.h) instead of starting one per command.

namespace dcpp::tools {

/// Parses argv (argv[0]: the program's name) and runs its command, writing to std::cout and
/// std::cerr. Returns the exit code: 0; 1 when the command failed (its message on std::cerr, one
/// line, naming the command); CLI11's code for a usage error or --help / --version (0). Throws
/// nothing: what a command throws becomes its message and exit code 1.
int run_cli(int argc, char** argv);

}  // namespace dcpp::tools
