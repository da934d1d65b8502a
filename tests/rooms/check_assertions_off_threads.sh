#!/bin/sh
# Catch2's assertion macros are not thread-safe: two ranks' threads asserting at once corrupt its
# state (Catch2 3.7 aborts on "redirect is already active"). Tests collect what each rank saw and
# assert on the main thread after the threads joined (tests/rank_threads.h).
# check_assertions_off_threads.sh SOURCE_DIR
# Prints each Catch2 assertion (CHECK, REQUIRE, INFO, FAIL, ...) written inside the body passed to
# a rank-thread helper (on_rank_threads, on_ranks, on_mesh) or to a std::thread in tests/, and
# exits 1 on any. Braces are counted per line, outside comments and string literals.
set -eu
source_dir=$1
cd "$source_dir/tests"
found=$(find . -name '*.cpp' | sort | xargs awk '
  FNR == 1 { depth = 0; inside = 0; armed = 0 }
  {
    line = $0
    sub(/\/\/.*/, "", line)          # comments
    gsub(/"([^"\\]|\\.)*"/, "\"\"", line)  # string literals
    if (!inside && line ~ /(on_rank_threads|on_ranks|on_mesh|std::thread|threads\.emplace_back)[ (]/) {
      armed = 1
    }
    if (inside && line ~ /(CHECK|REQUIRE|INFO|FAIL|SUCCEED|CAPTURE|UNSCOPED_INFO|WARN)(_[A-Z_]+)?[ ]*\(/) {
      print FILENAME ":" FNR ": " $0
    }
    n = length(line)
    for (i = 1; i <= n; i++) {
      c = substr(line, i, 1)
      if (c == "{") {
        if (armed && !inside) { inside = 1; depth = 0; armed = 0 }
        if (inside) depth++
      } else if (c == ";" && armed) {  # a declaration (std::thread t;), not a call with a body
        armed = 0
      } else if (c == "}" && inside) {
        depth--
        if (depth == 0) inside = 0
      }
    }
  }')
if [ -n "$found" ]; then
  echo "$found"
  echo "Catch2 assertions on a rank thread: collect the values there and assert after the join"
  exit 1
fi
echo "no Catch2 assertion runs on a rank thread"
