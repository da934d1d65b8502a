# ctest -P script: installs the dcpp build into a scratch prefix, builds a user project against it
# with find_package(dcpp <major.minor>) and the system's c++ (GCC 12 on Debian 12, whatever
# compiler built dcpp), and runs the result. Checks the versioning (CHANGELOG.md): each shared
# library installed under its SONAME, and another minor version refused. Variables: BUILD_DIR,
# SOURCE_DIR, WORK_DIR, DCPP_VERSION (x.y.z), DCPP_SOVERSION.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
file(GLOB_RECURSE sonames ${WORK_DIR}/prefix/libdcpp_checkpoint.so.${DCPP_SOVERSION})
if(NOT sonames)
  message(FATAL_ERROR "no libdcpp_checkpoint.so.${DCPP_SOVERSION} (the SONAME) was installed")
endif()
string(REGEX MATCH "^[0-9]+\\.[0-9]+" major_minor "${DCPP_VERSION}")
string(REGEX MATCH "[0-9]+$" minor "${major_minor}")
math(EXPR other_minor "${minor} + 1")
string(REGEX REPLACE "[0-9]+$" "${other_minor}" other_version "${major_minor}")
# Another minor version is refused before anything is built.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package -B ${WORK_DIR}/other
                -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DDCPP_REQUIRED_VERSION=${other_version}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0 OR NOT out MATCHES "version: ${DCPP_VERSION}")
  message(FATAL_ERROR "find_package(dcpp ${other_version}) accepted dcpp ${DCPP_VERSION}:\n${out}")
endif()
# Without a build type (no optimization): what this checks is that dcpp's headers compile and link
# with the user's compiler, not how fast the quickstart runs (the test takes 22 s of CPU, not 27).
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DDCPP_EXAMPLES_DIR=${SOURCE_DIR}/examples
    -DDCPP_REQUIRED_VERSION=${major_minor} -DCMAKE_BUILD_TYPE=)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/quickstart train ${WORK_DIR}/ckpt)
run(${WORK_DIR}/build/quickstart resume ${WORK_DIR}/ckpt)
file(REMOVE_RECURSE ${WORK_DIR})
