#pragma once
// Process groups for checkpoint traffic: a Gloo group from torchrun's (or dcpp-launch's)
// environment variables or from a store, the launcher's environment itself, and Ranks, the
// process group and coordinator rank that the options of saving and loading share, and the
// checkpoint traffic a rank has sent and received; ranks forked by `dcpp-launch --fork`; the
// DeviceMesh of an N-D parallel job and its groups.

#include <dcpp/dist/checkpoint_traffic.h>
#include <dcpp/dist/device_mesh.h>
#include <dcpp/dist/launched_rank.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/dist/ranks.h>
