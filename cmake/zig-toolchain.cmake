# Toolchain of the wheel (pyproject.toml, built in build-wheel/): PyPI's ziglang as the C and C++
# compiler, targeting glibc 2.28 (RHEL 8; Ubuntu 20.04 has 2.31) with its libc++ linked
# statically, so the wheel's binaries load on every distribution from glibc 2.28 on. Debian 12's
# g++ links against its own glibc 2.36 and cannot target an older one by flags.
#
# zig is found in the Python that runs the build (ziglang is a build requirement), or taken from
# TRAINTIME_ZIG. The compilers are small wrapper scripts written into the build folder, since
# CMake wants one program per compiler. zig's global cache (the libc++, libunwind and glibc stubs
# it builds for the target, minutes on 2 cores) is kept per zig version under
# ~/.cache/traintime/zig-<version> (or TRAINTIME_PYENV_CACHE, as scripts/pyenv.py does), so only
# the first build on a machine pays for it.
set(CMAKE_SYSTEM_NAME Linux)
if(NOT TRAINTIME_ZIG_TARGET)
  set(TRAINTIME_ZIG_TARGET "${CMAKE_HOST_SYSTEM_PROCESSOR}-linux-gnu.2.28")
endif()

if(NOT DEFINED TRAINTIME_ZIG_WRAPPERS)  # a try_compile project gets it from the main one (below)
  if(NOT TRAINTIME_ZIG AND DEFINED ENV{TRAINTIME_ZIG})
    set(TRAINTIME_ZIG "$ENV{TRAINTIME_ZIG}")
  endif()
  if(NOT TRAINTIME_ZIG)
    set(_tt_py "${Python_EXECUTABLE}")
    if(NOT _tt_py)
      set(_tt_py "${Python3_EXECUTABLE}")
    endif()
    if(NOT _tt_py)
      find_program(_tt_py NAMES python3 python)
    endif()
    execute_process(
      COMMAND "${_tt_py}" -c "import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"
      OUTPUT_VARIABLE TRAINTIME_ZIG OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _tt_rc ERROR_QUIET)
    if(NOT _tt_rc EQUAL 0 OR NOT EXISTS "${TRAINTIME_ZIG}")
      message(FATAL_ERROR "traintime: the wheel's toolchain needs PyPI's ziglang in '${_tt_py}' "
                          "(pip install ziglang, or set TRAINTIME_ZIG to a zig executable)")
    endif()
  endif()
  execute_process(COMMAND "${TRAINTIME_ZIG}" version OUTPUT_VARIABLE _tt_zig_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(DEFINED ENV{TRAINTIME_PYENV_CACHE} AND NOT "$ENV{TRAINTIME_PYENV_CACHE}" STREQUAL "")
    set(_tt_cache "$ENV{TRAINTIME_PYENV_CACHE}")
  elseif(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
    set(_tt_cache "$ENV{XDG_CACHE_HOME}/traintime")
  else()
    set(_tt_cache "$ENV{HOME}/.cache/traintime")
  endif()
  set(TRAINTIME_ZIG_CACHE "${_tt_cache}/zig-${_tt_zig_version}")
  # zig itself runs from a copy in the cache: pip's isolated build environment is a new folder
  # every time, and the paths of zig's own headers, which every object's dependencies name, must
  # stay the same for a second build in build-wheel/ to rebuild only what changed.
  set(_tt_zig_home "${TRAINTIME_ZIG_CACHE}/ziglang")
  if(NOT EXISTS "${_tt_zig_home}/zig")
    get_filename_component(_tt_zig_src "${TRAINTIME_ZIG}" DIRECTORY)
    string(RANDOM LENGTH 8 _tt_tmp)
    file(COPY "${_tt_zig_src}/" DESTINATION "${_tt_zig_home}.${_tt_tmp}" PATTERN "__pycache__" EXCLUDE)
    file(RENAME "${_tt_zig_home}.${_tt_tmp}" "${_tt_zig_home}" RESULT _tt_renamed)
    if(NOT _tt_renamed EQUAL 0)  # another build made it meanwhile (a non-empty folder is not replaced)
      file(REMOVE_RECURSE "${_tt_zig_home}.${_tt_tmp}")
    endif()
  endif()
  set(TRAINTIME_ZIG "${_tt_zig_home}/zig")
  set(TRAINTIME_ZIG_WRAPPERS "${CMAKE_BINARY_DIR}/zig-wrappers")
  foreach(_tt_tool cc c++ ar ranlib)
    if(_tt_tool MATCHES "^(cc|c\\+\\+)$")
      set(_tt_args "${_tt_tool} -target ${TRAINTIME_ZIG_TARGET}")
    else()
      set(_tt_args "${_tt_tool}")
    endif()
    file(WRITE "${TRAINTIME_ZIG_WRAPPERS}/zig-${_tt_tool}"
      "#!/bin/sh\n"
      "export ZIG_GLOBAL_CACHE_DIR=\"\${ZIG_GLOBAL_CACHE_DIR:-${TRAINTIME_ZIG_CACHE}}\"\n"
      "export ZIG_LOCAL_CACHE_DIR=\"\${ZIG_LOCAL_CACHE_DIR:-${CMAKE_BINARY_DIR}/zig-local-cache}\"\n"
      "exec \"${TRAINTIME_ZIG}\" ${_tt_args} \"$@\"\n")
    file(CHMOD "${TRAINTIME_ZIG_WRAPPERS}/zig-${_tt_tool}" PERMISSIONS
         OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TRAINTIME_ZIG_WRAPPERS TRAINTIME_ZIG_TARGET)

set(CMAKE_C_COMPILER "${TRAINTIME_ZIG_WRAPPERS}/zig-cc")
set(CMAKE_CXX_COMPILER "${TRAINTIME_ZIG_WRAPPERS}/zig-c++")
set(CMAKE_AR "${TRAINTIME_ZIG_WRAPPERS}/zig-ar" CACHE FILEPATH "zig ar" FORCE)
set(CMAKE_RANLIB "${TRAINTIME_ZIG_WRAPPERS}/zig-ranlib" CACHE FILEPATH "zig ranlib" FORCE)
