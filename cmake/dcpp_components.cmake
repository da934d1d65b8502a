# How dcpp's libraries are built (docs/design.md, "Rooms" and "Exported symbols").
#
# Each room's sources are compiled once, into an OBJECT library dcpp_<room>_objects, with hidden
# visibility: only declarations marked DCPP_API (core/include/dcpp/core/export.h) are exported.
# Those objects make two kinds of library:
#   - dcpp_<library>, SHARED, of the objects of one or more rooms: what users link (through
#     dcpp::dcpp) and what is installed. Linked with --no-undefined, so a library that uses a
#     hidden symbol of another fails to link here instead of failing to load in a user's program;
#   - dcpp_static, STATIC, all rooms in one: for the programs that reach into dcpp's internals
#     (the codec tests, the fuzz targets' replays, the `dcpp` command line), which then need no
#     internal symbol exported.
# A program links one or the other, never both: two copies of dcpp in one process would mean two
# of every static (the optimizer codec registry, the preemption flag, the logger handle).
# Internals that several libraries share (the logger, durable file steps) have one definition,
# in dcpp_core_internals (core/), a static library linked privately where it is needed.

# Hidden visibility, inline member functions included: only DCPP_API declarations are exported.
function(dcpp_hide_internals target)
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden
                                             VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# Undefined symbols fail the link of a shared library (GNU ld, gold, lld). Not with clang's
# sanitizers: their runtime is linked into the program only, so libraries leave it undefined.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND NOT (DCPP_SANITIZE AND CMAKE_CXX_COMPILER_ID MATCHES "Clang"))
  set(DCPP_NO_UNDEFINED "LINKER:--no-undefined")
else()
  set(DCPP_NO_UNDEFINED "")
endif()

# dcpp_add_room(<room> <source>...): dcpp_<room>_objects, an OBJECT library of the sources in
# <room>/src, compiled once (docs/design.md, "Rooms"). Its include directories:
#   - <room>/include, PUBLIC: the public headers, <dcpp/<room>/...>, installed;
#   - <room>/internal, PUBLIC in the build only: the headers the rooms above may use and users
#     never see, "<room>/...", not installed (a room without them has no such folder);
#   - <room>/src, PRIVATE: the room's own sources and private headers, seen by nobody else
#     (tests/rooms/check_rooms.sh checks the compile commands for it).
# The caller then adds what the room needs: the rooms below it as PUBLIC dcpp_<other>_objects,
# private libraries as PRIVATE.
function(dcpp_add_room room)
  set(objects dcpp_${room}_objects)
  add_library(${objects} OBJECT ${ARGN})
  target_include_directories(${objects}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/internal)
    target_include_directories(${objects} PUBLIC
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/internal>)
  endif()
  target_link_libraries(${objects} PRIVATE dcpp_warnings)
  dcpp_hide_internals(${objects})
  dcpp_use_precompiled_headers(${objects})
  set_property(GLOBAL APPEND PROPERTY DCPP_COMPONENT_OBJECTS ${objects})
  set_property(GLOBAL PROPERTY DCPP_ROOM_INCLUDE_${room} ${CMAKE_CURRENT_SOURCE_DIR}/include)
endfunction()

# dcpp_add_component(<component> <source>... [ROOMS <room>...]): the room <component> (above),
# and dcpp_<component>, the SHARED library of its objects and of the objects of the ROOMS (rooms
# made before, that no other shared library holds), with their public headers. A shared library
# is a unit of deployment, a room a unit of code: the engine's rooms (format, planner, storage,
# dist, checkpoint) make one library, libdcpp_checkpoint, so their internals stay hidden inside
# it. The caller adds the shared dcpp libraries it links against to dcpp_<component>, PUBLIC
# (never to the objects: dcpp_static reuses them and would pull the shared library in too).
function(dcpp_add_component component)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "ROOMS")
  dcpp_add_room(${component} ${arg_UNPARSED_ARGUMENTS})

  # The objects come through the PRIVATE link (CMake adds a directly linked object library's
  # objects), with their private libraries.
  add_library(dcpp_${component} SHARED)
  target_link_libraries(dcpp_${component} PRIVATE dcpp_${component}_objects)
  target_include_directories(dcpp_${component} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  foreach(room IN LISTS arg_ROOMS)
    get_property(room_include GLOBAL PROPERTY DCPP_ROOM_INCLUDE_${room})
    target_link_libraries(dcpp_${component} PRIVATE dcpp_${room}_objects)
    target_include_directories(dcpp_${component} PUBLIC $<BUILD_INTERFACE:${room_include}>)
  endforeach()
  target_link_options(dcpp_${component} PRIVATE ${DCPP_NO_UNDEFINED})
  # libdcpp_<component>.so.<DCPP_SOVERSION> (the SONAME) -> .so.<version>: a program built on one
  # minor version never loads another's.
  set_target_properties(dcpp_${component} PROPERTIES VERSION ${PROJECT_VERSION}
                                                     SOVERSION ${DCPP_SOVERSION})
endfunction()
