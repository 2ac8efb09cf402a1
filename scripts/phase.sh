# Sourced by test.sh, sanitize.sh and fuzz.sh: times each step of the script for the phase table
# .ci/run prints at its end (scripts/ci_times.py; docs/ci.md says how to read it).
#
#   tt_phase NAME [--ctest BUILD_DIR SLOWEST] -- COMMAND [ARG...]
#
# Runs COMMAND and returns its exit status. When TT_CI_PHASES names a file, appends one
# tab-separated line to it: NAME, wall seconds, exit status, for a CTest run the build folder whose
# ctest-results.xml holds each test's time and how many of its slowest tests the table lists, the
# CPU seconds (user + system) of COMMAND and the processes it waited for, and how many compiles
# ccache answered from its cache and how many it had to run. Without TT_CI_PHASES (a developer's
# run) it only runs COMMAND. Give COMMAND its variables through env (tt_phase NAME -- env V=x CMD):
# set in front of tt_phase, they would apply to tt_phase's own helpers too (an LD_PRELOAD, say).
tt_phase() {
  local name="$1" ctest_dir="" slowest=0
  shift
  if [ "${1:-}" = --ctest ]; then ctest_dir="$2" slowest="$3"; shift 3; fi
  [ "${1:-}" = -- ] && shift
  local start="${EPOCHREALTIME/[.,]/}" cpu0 hits0=0 misses0=0 rc=0
  _tt_children_cpu
  cpu0=$_TT_CPU
  [ -n "${TT_CI_PHASES:-}" ] && read -r hits0 misses0 < <(_tt_ccache_counts)
  "$@" || rc=$?
  if [ -n "${TT_CI_PHASES:-}" ]; then
    _tt_children_cpu
    local us=$(( ${EPOCHREALTIME/[.,]/} - start )) cpu=$(( _TT_CPU - cpu0 )) hits misses
    read -r hits misses < <(_tt_ccache_counts)
    printf '%s\t%d.%06d\t%d\t%s\t%d\t%d.%02d\t%d\t%d\n' "$name" $((us / 1000000)) $((us % 1000000)) "$rc" \
      "$ctest_dir" "$slowest" $((cpu / 100)) $((cpu % 100)) $((hits - hits0)) $((misses - misses0)) \
      >> "$TT_CI_PHASES"
  fi
  return "$rc"
}

# "HITS MISSES" of the compiler cache the builds use (cmake/CompilerCache.cmake: $CCACHE_DIR, else
# ~/.cache/traintime/ccache), "0 0" without ccache.
_tt_ccache_counts() {
  command -v ccache >/dev/null 2>&1 || { echo 0 0; return; }
  CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/traintime/ccache}" ccache --print-stats 2>/dev/null |
    awk -F'\t' '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 }
                 $1 == "cache_miss" { m += $2 } END { print h + 0, m + 0 }'
}

# _TT_CPU = CPU time of this shell's waited-for children, in 1/100 s: fields 16 and 17 (cutime,
# cstime) of /proc/PID/stat, which Linux gives in USER_HZ (100 on every architecture it exports
# them on). Read in this shell, not a command substitution, and from BASHPID, not $$, so that a
# subshell reads its own.
_tt_children_cpu() {
  local stat
  _TT_CPU=0
  read -r -a stat < "/proc/$BASHPID/stat" 2>/dev/null || return 0
  _TT_CPU=$(( ${stat[15]:-0} + ${stat[16]:-0} ))
}
