// save() and load() for one process: DCP's `state_dict_saver` / `state_dict_loader` steps, in
// order, with this process as coordinator.

#include <dcpp/checkpoint/checkpointer.h>

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful.h>

namespace dcpp {

namespace {

// Replaces, in a copy, every Stateful by its state dict (recursively).
StateValue resolve_stateful_copy(const StateValue& value) {
  if (value.is_stateful()) {
    StateValue resolved(value.stateful()->state_dict());
    return resolve_stateful_copy(resolved);
  }
  if (value.is_dict()) {
    StateDict copy;
    for (const auto& item : value.dict()) {
      copy.insert(item.key, resolve_stateful_copy(item.value));
    }
    return copy;
  }
  if (value.is_list()) {
    StateList copy;
    for (const StateValue& element : value.list()) {
      copy.push_back(resolve_stateful_copy(element));
    }
    return copy;
  }
  return value;
}

// While alive, every Stateful in a state dict is swapped for the dict its state_dict() returned,
// so the loader fills that dict in place. `commit` hands each loaded dict to load_state_dict();
// the Statefuls are put back in any case.
class StatefulSwap {
 public:
  explicit StatefulSwap(StateDict& root) {
    for (auto& item : root) {
      swap_in(item.value);
    }
  }
  ~StatefulSwap() {
    for (auto it = swapped_.rbegin(); it != swapped_.rend(); ++it) {
      *it->slot = StateValue(it->stateful);
    }
  }
  void commit() {
    // Innermost first: a Stateful's loaded dict holds its nested Statefuls' loaded state already.
    for (auto it = swapped_.rbegin(); it != swapped_.rend(); ++it) {
      const StateDict loaded = it->slot->dict();
      *it->slot = StateValue(it->stateful);
      it->stateful->load_state_dict(loaded);
    }
    swapped_.clear();
  }

 private:
  struct Swapped {
    StateValue* slot;
    std::shared_ptr<Stateful> stateful;
  };

  void swap_in(StateValue& value) {
    if (value.is_stateful()) {
      std::shared_ptr<Stateful> stateful = value.stateful();
      value = StateValue(stateful->state_dict());
      swapped_.push_back(Swapped{&value, stateful});
    }
    if (value.is_dict()) {
      for (auto& item : value.dict()) {
        swap_in(item.value);
      }
    } else if (value.is_list()) {
      for (StateValue& element : value.list()) {
        swap_in(element);
      }
    }
  }

  std::vector<Swapped> swapped_;
};

}  // namespace

Metadata save(const StateDict& state_dict, const std::filesystem::path& directory,
              const SaveOptions& options) {
  auto writer = make_filesystem_writer(directory, options.file_system);
  return save(state_dict, *writer, options);
}

Metadata save(const StateDict& state_dict, StorageWriter& storage_writer,
              const SaveOptions& options) {
  StateDict resolved = resolve_stateful_copy(StateValue(state_dict)).dict();
  std::shared_ptr<SavePlanner> planner =
      options.planner ? options.planner : make_default_save_planner();
  storage_writer.set_up(/*rank=*/0, /*is_coordinator=*/true);
  planner->set_up(resolved, /*is_coordinator=*/true);
  auto [plans, metadata] = planner->create_global_plan({planner->create_local_plan()});
  plans = storage_writer.prepare_global_plan(std::move(plans));
  const SavePlan final_plan = planner->finish_plan(std::move(plans.front()));
  std::vector<std::vector<WriteResult>> results{storage_writer.write_data(final_plan, *planner)};
  storage_writer.finish(metadata, results);
  return metadata;
}

LoadReport load(StateDict& state_dict, const std::filesystem::path& directory,
                const LoadOptions& options) {
  auto reader = make_filesystem_reader(directory, options.file_system);
  return load(state_dict, *reader, options);
}

LoadReport load(StateDict& state_dict, StorageReader& storage_reader, const LoadOptions& options) {
  const Metadata metadata = storage_reader.read_metadata();
  std::shared_ptr<LoadPlanner> planner =
      options.planner ? options.planner : make_default_load_planner(options.allow_partial_load);
  StatefulSwap statefuls(state_dict);
  storage_reader.set_up(metadata, /*rank=*/0, /*is_coordinator=*/true);
  planner->set_up(state_dict, metadata, /*is_coordinator=*/true);
  std::vector<LoadPlan> plans = planner->create_global_plan({planner->create_local_plan()});
  const LoadPlan final_plan = planner->finish_plan(std::move(plans.front()));
  storage_reader.read_data(final_plan, *planner);
  statefuls.commit();
  return planner->report();
}

StateDict load_from_keys(const std::filesystem::path& directory,
                         const std::vector<std::string>& keys,
                         const FileSystemReaderOptions& options) {
  LoadOptions load_options;
  load_options.file_system = options;
  load_options.planner = make_empty_state_dict_load_planner(keys);
  StateDict state_dict;
  load(state_dict, directory, load_options);
  return state_dict;
}

Metadata read_metadata(const std::filesystem::path& directory) {
  return make_filesystem_reader(directory)->read_metadata();
}

}  // namespace dcpp
