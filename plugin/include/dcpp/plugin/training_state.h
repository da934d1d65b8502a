#pragma once
// Kept for 0.1's includes until 0.3: the adapters for the rest of a training loop's state
// (make_rng_stateful, make_counter_stateful, make_function_stateful) live with the others in
// <dcpp/state_dict/stateful_adapters.h> since 0.2.

#include <dcpp/state_dict/stateful_adapters.h>
