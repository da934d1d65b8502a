// Saves a small state dict into the directory given, with the default (durable) options.
#include <dcpp/dcpp.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  dcpp::StateDict state;
  state.insert("weight", at::arange(12, at::kFloat));
  state.insert("step", 5);
  try {
    dcpp::save(state, argv[1]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
