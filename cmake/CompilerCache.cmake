# Compiler cache: when Debian's ccache is installed (scripts/install-deps.sh installs it with the
# test dependencies), every compile of every build folder (build/, build-asan/, build-tsan/,
# build-fuzz/, the CUDA examples' nvcc too) goes through one cache, so what was compiled before
# with the same flags, in this folder, another checkout or the previous CI run, is not compiled
# again (docs/ci.md). The objects live in $CCACHE_DIR when set, else ~/.cache/traintime/ccache,
# beside the project's other caches; paths are taken relative to the checkout (CCACHE_BASEDIR), so
# another clone of the same sources hits the same entries. Both are written into the launcher, so a
# plain `cmake --build` uses them as scripts/build.sh does. A launcher the user set
# (CMAKE_<LANG>_COMPILER_LAUNCHER, from the command line or the environment) is kept;
# -DTRAINTIME_CCACHE=OFF compiles without one.
option(TRAINTIME_CCACHE "Compile through ccache when it is installed" ON)
find_program(TRAINTIME_CCACHE_PROGRAM ccache)
find_program(TRAINTIME_ENV_PROGRAM env)
if(TRAINTIME_CCACHE AND TRAINTIME_CCACHE_PROGRAM AND TRAINTIME_ENV_PROGRAM)
  if(DEFINED ENV{CCACHE_DIR})
    set(_tt_ccache_dir "$ENV{CCACHE_DIR}")
  elseif(DEFINED ENV{XDG_CACHE_HOME})
    set(_tt_ccache_dir "$ENV{XDG_CACHE_HOME}/traintime/ccache")
  else()
    set(_tt_ccache_dir "$ENV{HOME}/.cache/traintime/ccache")
  endif()
  set(_tt_launcher ${TRAINTIME_ENV_PROGRAM} "CCACHE_DIR=${_tt_ccache_dir}"
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" ${TRAINTIME_CCACHE_PROGRAM})
  foreach(_tt_lang C CXX CUDA)
    if(NOT CMAKE_${_tt_lang}_COMPILER_LAUNCHER)
      set(CMAKE_${_tt_lang}_COMPILER_LAUNCHER ${_tt_launcher})
    endif()
  endforeach()
  message(STATUS "traintime: compiling through ccache, cache in ${_tt_ccache_dir}")
endif()
