# TRAINTIME_BUNDLED_DEPS (the wheel): the same targets Dependencies.cmake finds in Debian's
# packages, made from third_party/ (third_party/README.md: versions and licenses) and from the
# CUDA, CUPTI and NVTX headers of PyPI's nvidia-* packages in the Python that runs the build
# (build requirements in pyproject.toml). Headers only, except simdjson.cpp, which only
# traintime-report links (libtraintime.so uses simdjson's headers alone, as with Debian's).
set(_tt_tp ${PROJECT_SOURCE_DIR}/third_party)

add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE ${_tt_tp}/nlohmann)

add_library(traintime_bundled_simdjson STATIC ${_tt_tp}/simdjson/simdjson.cpp)
target_include_directories(traintime_bundled_simdjson SYSTEM PUBLIC ${_tt_tp}/simdjson)
target_compile_features(traintime_bundled_simdjson PUBLIC cxx_std_17)
set_target_properties(traintime_bundled_simdjson PROPERTIES
  POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
add_library(simdjson::simdjson ALIAS traintime_bundled_simdjson)

add_library(fmt::fmt-header-only INTERFACE IMPORTED)
target_include_directories(fmt::fmt-header-only SYSTEM INTERFACE ${_tt_tp}/fmt)
target_compile_definitions(fmt::fmt-header-only INTERFACE FMT_HEADER_ONLY=1)
add_library(spdlog::spdlog_header_only INTERFACE IMPORTED)
target_include_directories(spdlog::spdlog_header_only SYSTEM INTERFACE ${_tt_tp}/spdlog)
target_compile_definitions(spdlog::spdlog_header_only INTERFACE SPDLOG_FMT_EXTERNAL SPDLOG_HEADER_ONLY)
target_link_libraries(spdlog::spdlog_header_only INTERFACE fmt::fmt-header-only)
add_library(CLI11::CLI11 INTERFACE IMPORTED)
target_include_directories(CLI11::CLI11 SYSTEM INTERFACE ${_tt_tp}/cli11)

# nvidia/cu13/include of nvidia-cuda-runtime (cuda.h, cuda_runtime_api.h), nvidia-cuda-crt (crt/),
# nvidia-cuda-cccl (nv/target, which cuda_fp16.h includes),
# nvidia-cuda-cupti and
# nvidia-nvtx: one namespace package folder.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c
    "import os, nvidia; print(next(p for p in (os.path.join(d, 'cu13', 'include') for d in nvidia.__path__) if os.path.exists(os.path.join(p, 'cupti.h'))))"
  OUTPUT_VARIABLE TRAINTIME_CUDA_INCLUDE_DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _tt_rc ERROR_QUIET)
if(NOT _tt_rc EQUAL 0 OR NOT EXISTS "${TRAINTIME_CUDA_INCLUDE_DIR}/cuda.h" OR NOT EXISTS "${TRAINTIME_CUDA_INCLUDE_DIR}/nvtx3")
  message(FATAL_ERROR "traintime: the bundled build needs the CUDA, CUPTI and NVTX headers of PyPI's "
                      "nvidia-cuda-runtime, nvidia-cuda-cupti and nvidia-nvtx in ${Python3_EXECUTABLE} "
                      "(the wheel's build requirements, pyproject.toml)")
endif()
message(STATUS "traintime: CUDA, CUPTI and NVTX headers of PyPI's packages in ${TRAINTIME_CUDA_INCLUDE_DIR}")
# Compiled from a copy in the build folder, where a file is written only when its content
# changed: pip's isolated environment is a new folder every build (with new time stamps), and a
# second build in build-wheel/ rebuilds only what changed when the headers and their paths stay.
file(GLOB_RECURSE _tt_headers RELATIVE "${TRAINTIME_CUDA_INCLUDE_DIR}" "${TRAINTIME_CUDA_INCLUDE_DIR}/*")
foreach(_tt_header ${_tt_headers})
  get_filename_component(_tt_folder "${CMAKE_BINARY_DIR}/cuda-include/${_tt_header}" DIRECTORY)
  file(MAKE_DIRECTORY "${_tt_folder}")
  file(COPY_FILE "${TRAINTIME_CUDA_INCLUDE_DIR}/${_tt_header}" "${CMAKE_BINARY_DIR}/cuda-include/${_tt_header}"
       ONLY_IF_DIFFERENT)
endforeach()
set(TRAINTIME_CUDA_INCLUDE_DIR "${CMAKE_BINARY_DIR}/cuda-include")
# Where the CUPTI loader looks last (cupti/src/cupti_library.cpp): the usual toolkit folder of the
# machine the wheel runs on, never the build environment, which is gone by then.
set(TRAINTIME_CUDA_ROOT /usr/local/cuda)
add_library(traintime_cuda_headers INTERFACE)
target_include_directories(traintime_cuda_headers SYSTEM INTERFACE ${TRAINTIME_CUDA_INCLUDE_DIR} ${_tt_tp}/nccl)
