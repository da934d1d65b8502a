# How dcpp's libraries are built (docs/design.md, "Exported symbols").
#
# Each component's sources are compiled once, into an OBJECT library dcpp_<component>_objects,
# with hidden visibility: only declarations marked DCPP_API (core/include/dcpp/core/export.h) are
# exported. Those objects make two libraries:
#   - dcpp_<component>, SHARED: what users link (through dcpp::dcpp) and what is installed. Linked
#     with --no-undefined, so a library that uses a hidden symbol of another fails to link here
#     instead of failing to load in a user's program;
#   - dcpp_static, STATIC, all components in one: for the programs that reach into dcpp's
#     internals (the codec tests, the fuzz targets' replays, the `dcpp` command line), which then
#     need no internal symbol exported.
# A program links one or the other, never both: two copies of dcpp in one process would mean two
# of every static (the optimizer codec registry, the preemption flag, the logger handle).
# Internals that several components share (the logger, durable file steps) have one definition,
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

# dcpp_add_component(<component> <source>...): dcpp_<component>_objects (OBJECT) from the sources
# in <component>/src, and dcpp_<component> (SHARED) from those objects, with the component's
# public headers <component>/include. The caller then adds the component's dependencies:
#   - to dcpp_<component>_objects, what its sources need to compile and link: other components'
#     headers as PUBLIC dcpp_<other>_objects (never a shared dcpp_<other>: dcpp_static reuses
#     these objects and would pull the shared library in too), private libraries as PRIVATE;
#   - to dcpp_<component>, the shared dcpp libraries it links against, PUBLIC.
function(dcpp_add_component component)
  set(objects dcpp_${component}_objects)
  add_library(${objects} OBJECT ${ARGN})
  target_include_directories(${objects}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${objects} PRIVATE dcpp_warnings)
  dcpp_hide_internals(${objects})
  dcpp_use_precompiled_headers(${objects})

  # The objects come through the PRIVATE link (CMake adds a directly linked object library's
  # objects), with their private libraries.
  add_library(dcpp_${component} SHARED)
  target_link_libraries(dcpp_${component} PRIVATE ${objects})
  target_include_directories(dcpp_${component} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_options(dcpp_${component} PRIVATE ${DCPP_NO_UNDEFINED})
  set_property(GLOBAL APPEND PROPERTY DCPP_COMPONENT_OBJECTS ${objects})
endfunction()
