# Sourced by test.sh, sanitize.sh and fuzz.sh: times each step of the script for the phase table
# .ci/run prints at its end (scripts/ci_times.py; docs/ci.md says how to read it).
#
#   tt_phase NAME [--ctest BUILD_DIR SLOWEST] -- COMMAND [ARG...]
#
# Runs COMMAND and returns its exit status. When TT_CI_PHASES names a file, appends one
# tab-separated line to it: NAME, wall seconds, exit status, for a CTest run the build folder whose
# ctest-results.xml holds each test's time and how many of its slowest tests the table lists, and
# the CPU seconds (user + system) of COMMAND and the processes it waited for. Without
# TT_CI_PHASES (a developer's run) it only runs COMMAND.
tt_phase() {
  local name="$1" ctest_dir="" slowest=0
  shift
  if [ "${1:-}" = --ctest ]; then ctest_dir="$2" slowest="$3"; shift 3; fi
  [ "${1:-}" = -- ] && shift
  local start="${EPOCHREALTIME/[.,]/}" cpu0 rc=0
  _tt_children_cpu
  cpu0=$_TT_CPU
  "$@" || rc=$?
  if [ -n "${TT_CI_PHASES:-}" ]; then
    _tt_children_cpu
    local us=$(( ${EPOCHREALTIME/[.,]/} - start )) cpu=$(( _TT_CPU - cpu0 ))
    printf '%s\t%d.%06d\t%d\t%s\t%d\t%d.%02d\n' "$name" $((us / 1000000)) $((us % 1000000)) "$rc" \
      "$ctest_dir" "$slowest" $((cpu / 100)) $((cpu % 100)) >> "$TT_CI_PHASES"
  fi
  return "$rc"
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
