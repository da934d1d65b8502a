#pragma once
// dcpp's extension points, as DCP has them: the save and load planners, the storage drivers
// (file system, Hugging Face safetensors, your own), the optimizer state codecs, the parallel
// layouts the state-dict helpers read, and the checkpoint's Metadata. A training loop needs none
// of it: <dcpp/dcpp.h>.

#include <dcpp/dcpp.h>

// What a checkpoint is: DCP's Metadata, and the flat keys of a nested state dict.
#include <dcpp/format/metadata.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/stateful_swap.h>

// Planners: which items a rank writes or reads.
#include <dcpp/planner/load_planner.h>
#include <dcpp/planner/plan.h>
#include <dcpp/planner/save_planner.h>

// Storage drivers.
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/filesystem_reader.h>
#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/huggingface_storage.h>
#include <dcpp/storage/location_driver.h>
#include <dcpp/storage/memory_step.h>
#include <dcpp/storage/s3_deadline.h>
#include <dcpp/storage/s3_options.h>
#include <dcpp/storage/s3_prefix.h>
#include <dcpp/storage/s3_storage.h>
#include <dcpp/storage/storage_location.h>
#include <dcpp/storage/storage_reader.h>
#include <dcpp/storage/storage_writer.h>

// Async stagers of your own.
#include <dcpp/async/async_stager.h>

// Optimizers and parallel layouts of your own (a layout implements dcpp::ModelLayout).
#include <dcpp/parallel/dim0_split.h>
#include <dcpp/state_dict/optimizer_state_codec.h>
