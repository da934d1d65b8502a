# CUDA and NCCL, compiled in where the libtorch found has them (docs/gpu.md):
#   DCPP_WITH_CUDA  libtorch was built with CUDA (its CMake package sets CAFFE2_USE_CUDA): pinned
#                   staging buffers, copies on the stager's own streams, loads onto the device;
#   DCPP_WITH_NCCL  it has c10d's ProcessGroupNCCL too: DeviceMesh's NCCL training groups.
# Both are private compile definitions of the rooms that use them (dcpp_cuda_definitions); the
# public headers do not change with them, so one program builds against either libtorch.
set(DCPP_WITH_CUDA OFF)
set(DCPP_WITH_NCCL OFF)
if(CAFFE2_USE_CUDA)
  set(DCPP_WITH_CUDA ON)
  # USE_C10D_NCCL is how libtorch's own build guards ProcessGroupNCCL.hpp; its CMake package does
  # not say whether the library has it, so a program that makes the group's options must link
  # (against the library files: the package's imported targets are not seen by the check).
  include(CheckCXXSourceCompiles)
  set(dcpp_torch_files)
  foreach(library torch_cuda torch_cpu c10_cuda c10)
    find_library(DCPP_${library}_LIBRARY ${library} HINTS "${TORCH_INSTALL_PREFIX}/lib")
    list(APPEND dcpp_torch_files ${DCPP_${library}_LIBRARY})
  endforeach()
  set(CMAKE_REQUIRED_DEFINITIONS -DUSE_C10D_NCCL ${TORCH_CXX_FLAGS})
  set(CMAKE_REQUIRED_INCLUDES ${TORCH_INCLUDE_DIRS})
  set(CMAKE_REQUIRED_LIBRARIES ${dcpp_torch_files})
  check_cxx_source_compiles([[
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
int main() { return c10d::ProcessGroupNCCL::Options::create() ? 0 : 1; }
]] DCPP_LIBTORCH_HAS_NCCL)
  unset(CMAKE_REQUIRED_DEFINITIONS)
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_LIBRARIES)
  if(DCPP_LIBTORCH_HAS_NCCL)
    set(DCPP_WITH_NCCL ON)
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
endif()
