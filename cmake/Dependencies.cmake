# Third-party dependencies. By default from Debian packages (scripts/install-deps.sh installs them);
# with TRAINTIME_BUNDLED_DEPS (the wheel, pyproject.toml) from third_party/ and the Python build
# environment's PyPI packages, so a machine without those Debian packages can build too.
option(TRAINTIME_BUNDLED_DEPS
       "Take nlohmann/json, simdjson, spdlog, fmt, CLI11 and nccl.h from third_party/ and the CUDA, CUPTI and NVTX headers from PyPI's nvidia-* packages (the wheel)" OFF)

find_package(Threads REQUIRED)
if(TRAINTIME_BUNDLED_DEPS)
  include(${CMAKE_CURRENT_LIST_DIR}/BundledDependencies.cmake)
  return()
endif()
find_package(nlohmann_json 3 REQUIRED)
find_package(simdjson 3 REQUIRED)  # read_rank_file's parser (core/src/rank_file_read.cpp)
find_package(spdlog REQUIRED)   # used header-only, compiled privately into libtraintime.so
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)    # every command line (tools/)

# CUDA toolkit: headers only (DESIGN §2: no DT_NEEDED on CUDA, CUPTI or NCCL).
set(CUDAToolkit_ROOT "$ENV{CUDAToolkit_ROOT}" CACHE PATH "Root of the CUDA toolkit (CUDA 13)")
set(_tt_cuda_hints ${CUDAToolkit_ROOT} /usr/local/cuda)
find_path(TRAINTIME_CUDA_INCLUDE_DIR NAMES cupti.h cuda.h nccl.h
          HINTS ${_tt_cuda_hints} PATH_SUFFIXES include extras/CUPTI/include NO_DEFAULT_PATH)
find_path(TRAINTIME_CUPTI_INCLUDE_DIR NAMES cupti_activity.h
          HINTS ${_tt_cuda_hints} PATH_SUFFIXES include extras/CUPTI/include NO_DEFAULT_PATH)
find_path(TRAINTIME_NCCL_INCLUDE_DIR NAMES nccl.h
          HINTS ${_tt_cuda_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
if(NOT TRAINTIME_CUDA_INCLUDE_DIR OR NOT TRAINTIME_CUPTI_INCLUDE_DIR OR NOT TRAINTIME_NCCL_INCLUDE_DIR)
  message(FATAL_ERROR
    "traintime: CUDA toolkit headers (cuda.h, cupti.h, nccl.h) not found under "
    "'${CUDAToolkit_ROOT}' or /usr/local/cuda; set CUDAToolkit_ROOT to your CUDA 13 toolkit, "
    "e.g. cmake -DCUDAToolkit_ROOT=/opt/cuda-13 ...")
endif()
get_filename_component(TRAINTIME_CUDA_ROOT "${TRAINTIME_CUDA_INCLUDE_DIR}/.." ABSOLUTE)
message(STATUS "traintime: CUDA toolkit headers in ${TRAINTIME_CUDA_INCLUDE_DIR}")

# Headers of CUDA/CUPTI/NCCL as an interface target; only cupti/, preload/ and tests/sim use it.
add_library(traintime_cuda_headers INTERFACE)
target_include_directories(traintime_cuda_headers SYSTEM INTERFACE
  ${TRAINTIME_CUDA_INCLUDE_DIR} ${TRAINTIME_CUPTI_INCLUDE_DIR} ${TRAINTIME_NCCL_INCLUDE_DIR})
