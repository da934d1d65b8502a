#pragma once
// Process groups for checkpoint traffic: a Gloo group from torchrun's (or dcpp-launch's)
// environment variables or from a store, and the launcher's environment itself.

#include <dcpp/dist/process_group.h>
