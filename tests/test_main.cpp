// The test runner's entry point (Catch2 v2); with Catch2 v3 the library provides it.
#ifndef DCPP_CATCH2_V3
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
