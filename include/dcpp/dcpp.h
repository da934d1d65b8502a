#pragma once
// What a training loop uses, in one include: the state dict and Stateful, save and load, async
// saves, the state-dict helpers for models and optimizers (plain, DDP, FSDP, pipeline), the
// checkpoint manager and its callbacks, and the error dcpp throws.
//
// The other tiers: <dcpp/extend.h> for the extension points (planners, storage drivers, optimizer
// codecs, the checkpoint metadata); <dcpp/dist.h> for process groups and the launcher's
// environment.

// The release: DCPP_VERSION, DCPP_VERSION_MAJOR, _MINOR and _PATCH.
#include <dcpp/version.h>

// The state and what a checkpoint holds of it.
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/format/python_values.h>
#include <dcpp/state_dict/incompatible_keys.h>
#include <dcpp/state_dict/python_object.h>
#include <dcpp/state_dict/sharded_tensor.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/state_dict/stateful.h>
#include <dcpp/state_dict/stateful_adapters.h>
#include <dcpp/state_dict/whole_value.h>

// Saving and loading, blocking or in the background.
#include <dcpp/async/async_checkpointer.h>
#include <dcpp/async/blocking_stager.h>
#include <dcpp/async/future.h>
#include <dcpp/async/tbb_stager.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/storage/location.h>

// Model and optimizer state dicts under fully qualified names, whatever the parallel layout.
#include <dcpp/parallel/data_parallel.h>
#include <dcpp/parallel/fully_sharded_data_parallel.h>
#include <dcpp/parallel/pipeline_stage.h>
#include <dcpp/parallel/tensor_parallel.h>
#include <dcpp/parallel/tensor_parallel_layers.h>
#include <dcpp/state_dict/model_layout.h>
#include <dcpp/state_dict/model_optimizer_state_dict.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/optimizer_layout.h>
#include <dcpp/state_dict/optimizer_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/state_dict_options.h>

// The training loop's side: when to save, what to keep, where to resume from.
#include <dcpp/plugin/checkpoint_callback.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/plugin/preemption.h>
#include <dcpp/plugin/remote_tier.h>
#include <dcpp/plugin/retention_policy.h>
#include <dcpp/plugin/training_callback.h>
#include <dcpp/plugin/training_context.h>
