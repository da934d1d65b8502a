// `dcpp flush-memory` (flush_command.h).

#include "flush/flush_command.h"

#include <dcpp/plugin/memory_flush.h>

#include <iostream>
#include <memory>
#include <string>

namespace dcpp::tools {

void add_flush_memory_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "flush-memory",
      "Commit the newest step that every rank of a job that is no longer running holds in its "
      "memory tier under the CheckpointManager's root, then remove the job's regions");
  auto options = std::make_shared<MemoryFlushOptions>();
  auto root = std::make_shared<std::string>();
  command->add_option("ROOT", *root, "The CheckpointManager's root directory")->required();
  command->add_option("--ranks", options->ranks, "The job's ranks, all on this host")
      ->required()
      ->check(CLI::PositiveNumber);
  command->add_option("--job", options->job,
                      "The memory tier's job name (MemoryTierOptions::job; default: the one the "
                      "manager derives from ROOT)");
  command->add_flag("--keep", options->keep_regions, "Leave the regions in place");
  command->callback([=] {
    options->root = *root;
    std::cout << flush_memory_tier(*options).message << "\n";
  });
}

}  // namespace dcpp::tools
