# CUDA and NCCL, compiled in where the libtorch found has them (docs/gpu.md):
#   DCPP_WITH_CUDA  libtorch was built with CUDA (its CMake package sets CAFFE2_USE_CUDA): pinned
#                   staging buffers, copies on the stager's own streams, loads onto the device;
#   DCPP_WITH_NCCL  it has c10d's ProcessGroupNCCL too: DeviceMesh's NCCL training groups.
# Both are private compile definitions of the rooms that use them (dcpp_cuda_definitions); the
# public headers do not change with them, so one program builds against either libtorch.
#
# NCCL: USE_C10D_NCCL is how libtorch's own build guards ProcessGroupNCCL.hpp; its CMake package
# does not say whether the library has it, so a program that makes the group's options must compile
# and link. That header includes nccl.h and the CUDA runtime's headers, which a libtorch installed
# as PyTorch's wheel does not hold: nccl.h is in the wheel's NCCL package
# (site-packages/nvidia/nccl/include) and the CUDA headers in the toolkit (/usr/local/cuda/include).
# So the probe is given the toolkit's include directories (CUDAToolkit_INCLUDE_DIRS or
# CUDA_INCLUDE_DIRS, as libtorch's package sets them) and NCCL's (DCPP_NCCL_INCLUDE_DIR, found
# below or given), and when it fails the configure step says why: which header is missing, that
# the compile failed, or that the link failed. Where the link needs NCCL's library named (a
# libtorch whose own run path does not lead the linker to it), the probe is tried again with it
# (DCPP_NCCL_LIBRARY), and dcpp's rooms link it then. NCCL's include directory is given to the
# rooms that compile with USE_C10D_NCCL (dcpp_cuda_definitions), unless it is the compiler's own.
set(DCPP_WITH_CUDA OFF)
set(DCPP_WITH_NCCL OFF)
set(dcpp_nccl_include_dirs)
set(dcpp_nccl_libraries)
if(CAFFE2_USE_CUDA)
  set(DCPP_WITH_CUDA ON)
  include(CheckCXXSourceCompiles)
  set(dcpp_torch_files)
  foreach(library torch_cuda torch_cpu c10_cuda c10)
    find_library(DCPP_${library}_LIBRARY ${library} HINTS "${TORCH_INSTALL_PREFIX}/lib")
    list(APPEND dcpp_torch_files ${DCPP_${library}_LIBRARY})
  endforeach()

  # The CUDA toolkit's headers: what libtorch's package found, else where nvcc lives.
  set(dcpp_cuda_include_dirs ${CUDAToolkit_INCLUDE_DIRS} ${CUDA_INCLUDE_DIRS})
  if(NOT dcpp_cuda_include_dirs)
    foreach(root "${CUDAToolkit_ROOT}" "${CUDA_TOOLKIT_ROOT_DIR}" "$ENV{CUDA_HOME}")
      if(root AND EXISTS "${root}/include/cuda_runtime_api.h")
        list(APPEND dcpp_cuda_include_dirs "${root}/include")
      endif()
    endforeach()
    if(CMAKE_CUDA_COMPILER)
      get_filename_component(dcpp_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
      list(APPEND dcpp_cuda_include_dirs "${dcpp_nvcc_dir}/../include")
    endif()
    list(APPEND dcpp_cuda_include_dirs /usr/local/cuda/include)
  endif()
  # NCCL's header: libtorch's own include directories, the wheel's NCCL package beside torch in
  # site-packages (TORCH_INSTALL_PREFIX is site-packages/torch there), the toolkit, /usr/include.
  get_filename_component(dcpp_torch_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
  file(GLOB dcpp_nvidia_include_dirs "${dcpp_torch_site}/nvidia/*/include")
  find_path(DCPP_NCCL_INCLUDE_DIR nccl.h
    HINTS ${TORCH_INCLUDE_DIRS} "${dcpp_torch_site}/nvidia/nccl/include" ${dcpp_nvidia_include_dirs}
          ${dcpp_cuda_include_dirs}
    PATHS /usr/local/cuda/include /usr/include
    DOC "Where nccl.h is, for c10d's ProcessGroupNCCL.hpp (default: libtorch's include directories, "
        "site-packages/nvidia/nccl/include beside torch, /usr/local/cuda/include, /usr/include)")
  find_path(DCPP_CUDA_RUNTIME_INCLUDE_DIR cuda_runtime_api.h
    HINTS ${TORCH_INCLUDE_DIRS} ${dcpp_cuda_include_dirs} ${dcpp_nvidia_include_dirs}
    PATHS /usr/local/cuda/include /usr/include
    DOC "Where the CUDA runtime's headers are (the CUDA toolkit's include directory)")
  find_path(DCPP_TORCH_PROCESS_GROUP_NCCL_DIR torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp
    HINTS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
  # NCCL's library, for the second try (the wheel ships libnccl.so.2 only, without libnccl.so).
  find_library(DCPP_NCCL_LIBRARY NAMES nccl libnccl.so.2
    HINTS "${dcpp_torch_site}/nvidia/nccl/lib" "${TORCH_INSTALL_PREFIX}/lib"
    DOC "NCCL's library, linked only where the probe of ProcessGroupNCCL needs it named")

  # The include directories the probe and the NCCL rooms need, less the compiler's own (an
  # -isystem /usr/include breaks the C library's #include_next).
  set(dcpp_probe_include_dirs ${TORCH_INCLUDE_DIRS})
  foreach(dir IN LISTS dcpp_cuda_include_dirs DCPP_CUDA_RUNTIME_INCLUDE_DIR DCPP_NCCL_INCLUDE_DIR)
    if(NOT dir OR NOT EXISTS "${dir}")
      continue()
    endif()
    get_filename_component(dir "${dir}" REALPATH)
    set(implicit FALSE)
    foreach(implicit_dir IN LISTS CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
      get_filename_component(implicit_dir "${implicit_dir}" REALPATH)
      if(dir STREQUAL implicit_dir)
        set(implicit TRUE)
      endif()
    endforeach()
    if(NOT implicit)
      list(APPEND dcpp_probe_include_dirs "${dir}")
      if(DCPP_NCCL_INCLUDE_DIR AND EXISTS "${DCPP_NCCL_INCLUDE_DIR}")
        get_filename_component(nccl_dir "${DCPP_NCCL_INCLUDE_DIR}" REALPATH)
        if(dir STREQUAL nccl_dir)
          list(APPEND dcpp_nccl_include_dirs "${dir}")
        endif()
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES dcpp_probe_include_dirs)
  list(REMOVE_DUPLICATES dcpp_nccl_include_dirs)

  set(dcpp_nccl_probe [[
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
int main() { return c10d::ProcessGroupNCCL::Options::create() ? 0 : 1; }
]])
  set(CMAKE_REQUIRED_DEFINITIONS -DUSE_C10D_NCCL ${TORCH_CXX_FLAGS})
  set(CMAKE_REQUIRED_INCLUDES ${dcpp_probe_include_dirs})
  set(CMAKE_REQUIRED_QUIET ON)
  # First compile only (a static library links nothing), so that a failure says which step failed.
  set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
  check_cxx_source_compiles("${dcpp_nccl_probe}" DCPP_LIBTORCH_NCCL_HEADERS_COMPILE)
  unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
  set(dcpp_nccl_why "")
  if(NOT DCPP_TORCH_PROCESS_GROUP_NCCL_DIR)
    set(dcpp_nccl_why "libtorch's headers have no torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp")
  elseif(NOT DCPP_LIBTORCH_NCCL_HEADERS_COMPILE)
    set(dcpp_nccl_why "a program including ProcessGroupNCCL.hpp (with USE_C10D_NCCL) did not compile")
    if(NOT DCPP_NCCL_INCLUDE_DIR)
      string(APPEND dcpp_nccl_why ": nccl.h was not found (searched libtorch's include directories, "
             "${dcpp_torch_site}/nvidia/nccl/include, the CUDA toolkit's, /usr/local/cuda/include and "
             "/usr/include; give -DDCPP_NCCL_INCLUDE_DIR=<dir>)")
    endif()
    if(NOT DCPP_CUDA_RUNTIME_INCLUDE_DIR)
      string(APPEND dcpp_nccl_why ": cuda_runtime_api.h was not found (the CUDA toolkit's headers; "
             "searched ${dcpp_cuda_include_dirs})")
    endif()
    if(DCPP_NCCL_INCLUDE_DIR AND DCPP_CUDA_RUNTIME_INCLUDE_DIR)
      string(APPEND dcpp_nccl_why " although nccl.h (${DCPP_NCCL_INCLUDE_DIR}) and the CUDA headers "
             "(${DCPP_CUDA_RUNTIME_INCLUDE_DIR}) were found; the compiler's message is in "
             "${CMAKE_BINARY_DIR}/CMakeFiles/CMakeConfigureLog.yaml (CMakeError.log before CMake 3.26), "
             "under DCPP_LIBTORCH_NCCL_HEADERS_COMPILE")
    endif()
  else()
    # Then compile and link against libtorch's library files (the package's imported targets are
    # not seen by the check); with NCCL's library too where that alone fails.
    set(CMAKE_REQUIRED_LIBRARIES ${dcpp_torch_files})
    check_cxx_source_compiles("${dcpp_nccl_probe}" DCPP_LIBTORCH_HAS_NCCL)
    if(DCPP_LIBTORCH_HAS_NCCL)
      set(DCPP_WITH_NCCL ON)
    elseif(DCPP_NCCL_LIBRARY)
      set(CMAKE_REQUIRED_LIBRARIES ${dcpp_torch_files} ${DCPP_NCCL_LIBRARY})
      check_cxx_source_compiles("${dcpp_nccl_probe}" DCPP_LIBTORCH_HAS_NCCL_WITH_LIBRARY)
      if(DCPP_LIBTORCH_HAS_NCCL_WITH_LIBRARY)
        set(DCPP_WITH_NCCL ON)
        set(dcpp_nccl_libraries ${DCPP_NCCL_LIBRARY})
      endif()
    endif()
    if(NOT DCPP_WITH_NCCL)
      list(JOIN dcpp_torch_files ", " dcpp_torch_file_names)
      string(CONCAT dcpp_nccl_why "a program making ProcessGroupNCCL's options compiled but did "
                    "not link against ${dcpp_torch_file_names}")
      if(DCPP_NCCL_LIBRARY)
        string(APPEND dcpp_nccl_why " (nor with ${DCPP_NCCL_LIBRARY})")
      else()
        string(APPEND dcpp_nccl_why " (and NCCL's library was not found: give -DDCPP_NCCL_LIBRARY=<file>)")
      endif()
      string(APPEND dcpp_nccl_why "; the linker's message is in ${CMAKE_BINARY_DIR}/CMakeFiles/"
             "CMakeConfigureLog.yaml (CMakeError.log before CMake 3.26), under DCPP_LIBTORCH_HAS_NCCL")
    endif()
    unset(CMAKE_REQUIRED_LIBRARIES)
  endif()
  unset(CMAKE_REQUIRED_DEFINITIONS)
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_QUIET)
  if(DCPP_WITH_NCCL)
    set(dcpp_nccl_linked "")
    if(dcpp_nccl_libraries)
      set(dcpp_nccl_linked "; NCCL's library linked: ${dcpp_nccl_libraries}")
    endif()
    message(STATUS "dcpp: NCCL: nccl.h in ${DCPP_NCCL_INCLUDE_DIR}, CUDA headers in "
                   "${DCPP_CUDA_RUNTIME_INCLUDE_DIR}${dcpp_nccl_linked}")
  else()
    message(WARNING "dcpp: NCCL groups are not compiled in: ${dcpp_nccl_why}")
  endif()
endif()
message(STATUS "dcpp: CUDA paths compiled in: ${DCPP_WITH_CUDA}; NCCL groups compiled in: "
               "${DCPP_WITH_NCCL}")

add_library(dcpp_cuda_definitions INTERFACE)
if(DCPP_WITH_CUDA)
  target_compile_definitions(dcpp_cuda_definitions INTERFACE DCPP_WITH_CUDA)
endif()
if(DCPP_WITH_NCCL)
  target_compile_definitions(dcpp_cuda_definitions INTERFACE DCPP_WITH_NCCL USE_C10D_NCCL)
  if(dcpp_nccl_include_dirs)
    target_include_directories(dcpp_cuda_definitions SYSTEM INTERFACE ${dcpp_nccl_include_dirs})
  endif()
  if(dcpp_nccl_libraries)
    target_link_libraries(dcpp_cuda_definitions INTERFACE ${dcpp_nccl_libraries})
  endif()
endif()
