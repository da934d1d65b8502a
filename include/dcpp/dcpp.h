#pragma once
// Everything dcpp offers, in one include.

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/sharded_tensor.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/state_dict/stateful.h>
#include <dcpp/checkpoint/metadata.h>
