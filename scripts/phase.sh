# Sourced by test.sh, sanitize.sh and fuzz.sh: times each step of the script for the phase table
# .ci/run prints at its end (scripts/ci_times.py; docs/ci.md says how to read it).
#
#   tt_phase NAME [--ctest BUILD_DIR SLOWEST] -- COMMAND [ARG...]
#
# Runs COMMAND and returns its exit status. When TRAINTIME_PHASES names a file, appends one
# tab-separated line to it: NAME, wall seconds, exit status, and for a CTest run the build folder
# whose ctest-results.xml holds each test's time and how many of its slowest tests the table
# lists. Without TRAINTIME_PHASES (a developer's run) it only runs COMMAND.
tt_phase() {
  local name="$1" ctest_dir="" slowest=0
  shift
  if [ "${1:-}" = --ctest ]; then ctest_dir="$2" slowest="$3"; shift 3; fi
  [ "${1:-}" = -- ] && shift
  local start="${EPOCHREALTIME/[.,]/}" rc=0
  "$@" || rc=$?
  if [ -n "${TRAINTIME_PHASES:-}" ]; then
    local us=$(( ${EPOCHREALTIME/[.,]/} - start ))
    printf '%s\t%d.%06d\t%d\t%s\t%d\n' "$name" $((us / 1000000)) $((us % 1000000)) "$rc" "$ctest_dir" \
      "$slowest" >> "$TRAINTIME_PHASES"
  fi
  return "$rc"
}
