#!/bin/sh
# The rooms' boundaries (docs/design.md, "Rooms"), checked on what the compiler is told:
# check_rooms.sh SOURCE_DIR COMPILE_COMMANDS_JSON
#   - a room's source sees the public headers (<room>/include) and internal headers
#     (<room>/internal) of rooms at or below it only, in this order:
#       core < state_dict < format < planner < storage < dist < checkpoint < async < plugin,
#     with parallel on state_dict beside the engine;
#   - no room's source, and nothing in tools/, bench/, examples/ or fuzz/, sees another room's
#     src/ (tests may see the src/ of the rooms they test).
# Prints each offending source with the directory it must not see, and exits 1 on any.
set -eu
source_dir=$1
compile_commands=$2
[ -f "$compile_commands" ] || { echo "no $compile_commands (CMAKE_EXPORT_COMPILE_COMMANDS)"; exit 1; }

awk -v root="$source_dir" '
function level(room) {
  if (room == "core") return 0
  if (room == "state_dict") return 1
  if (room == "format") return 2
  if (room == "planner") return 3
  if (room == "storage") return 4
  if (room == "dist") return 5
  if (room == "checkpoint") return 6
  if (room == "async") return 7
  if (room == "plugin") return 8
  return -1
}
# May a source of `room` see the include/ or internal/ of `seen`?
function below(room, seen) {
  if (room == "parallel") return seen == "core" || seen == "state_dict" || seen == "parallel"
  if (seen == "parallel") return 0
  return level(seen) >= 0 && level(seen) <= level(room)
}
# Checks one source compiled with `command`.
function check(file, command,    relative, parts, owner, is_room, n, words, i, word, seen_parts, seen, kind, bad) {
  if (index(file, root "/") != 1) return
  relative = substr(file, length(root) + 2)
  split(relative, parts, "/")
  owner = parts[1]
  if (owner == "tests" || owner == "build") return
  is_room = (level(owner) >= 0 || owner == "parallel") && parts[2] == "src"
  if (!is_room && owner != "tools" && owner != "bench" && owner != "examples" && owner != "fuzz") return
  checked++
  n = split(command, words, " ")
  for (i = 1; i <= n; i++) {
    word = words[i]
    if (word == "-I" || word == "-isystem") { word = words[++i] } else if (word ~ /^-I/) { word = substr(word, 3) } else continue
    if (index(word, root "/") != 1) continue
    split(substr(word, length(root) + 2), seen_parts, "/")
    seen = seen_parts[1]; kind = seen_parts[2]
    if (level(seen) < 0 && seen != "parallel") continue
    bad = 0
    if (kind == "src") bad = !(is_room && seen == owner)
    else if (is_room && (kind == "include" || kind == "internal")) bad = !below(owner, seen)
    if (bad) { print relative " sees " seen "/" kind; failures++ }
  }
}
/"command":/ { command = $0 }
/"file":/ {
  file = $0
  sub(/^[^:]*: *"/, "", file); sub(/",? *$/, "", file)
  # A unity build compiles generated files that #include the sources (CMAKE_UNITY_BUILD): each
  # source they include is checked with the command that compiles it.
  if (file ~ /\/Unity\/unity_[0-9]+_cxx\.cxx$/) {
    while ((getline line < file) > 0) {
      if (line ~ /^#include "/) {
        sub(/^#include "/, "", line); sub(/".*$/, "", line)
        check(line, command)
      }
    }
    close(file)
  } else {
    check(file, command)
  }
}
END {
  if (checked == 0) { print "no source of a room, tools/, bench/, examples/ or fuzz/ in " ARGV[1]; exit 1 }
  if (failures) { print failures " room boundary violations (docs/design.md, \"Rooms\")"; exit 1 }
  print "every room sees only the rooms below it"
}' "$compile_commands"
