// The libtorch headers nearly every dcpp source includes, compiled once per build (see
// dcpp_use_precompiled_headers in the top-level CMakeLists.txt). Parsing them is most of the cost
// of compiling a dcpp source file; precompiling them makes a clean build about twice as fast, which
// is what lets CI build the sanitizer configurations too.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
