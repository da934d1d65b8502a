#pragma once
// Everything dcpp offers, in one include.

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/filesystem_reader.h>
#include <dcpp/checkpoint/filesystem_writer.h>
#include <dcpp/checkpoint/load_planner.h>
#include <dcpp/checkpoint/metadata.h>
#include <dcpp/checkpoint/plan.h>
#include <dcpp/checkpoint/process_group.h>
#include <dcpp/checkpoint/save_planner.h>
#include <dcpp/checkpoint/storage_reader.h>
#include <dcpp/checkpoint/storage_writer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/sharded_tensor.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/state_dict/stateful.h>
