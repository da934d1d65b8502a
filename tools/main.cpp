// The `dcpp` command line: look into, check and convert checkpoints (cli.h).

#include "cli.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // The commands stream one tensor at a time and promise memory of about two tensors, so a freed
  // tensor must go back to the system. glibc raises its mmap threshold to the size of each freed
  // mapped block (up to 32 MiB); later tensors then come from the heap, whose top one small
  // allocation can pin, and the peak grows with the allocation order. A fixed threshold keeps
  // every block of 1 MiB or more mapped, and unmapped when freed.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  return dcpp::tools::run_cli(argc, argv);
}
