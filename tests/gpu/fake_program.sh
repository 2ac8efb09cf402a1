#!/bin/sh
# FAKE cuda_mlp / nccl_sweep for the plumbing test of scripts/gpu-validate.sh (no GPU involved):
# writes the hand-made rank and events files of tests/gpu/data that FAKE_KIND names, and one
# file where TRAINTIME_RECORD_FIXTURE points, as the real programs under the profiler would.
# FAKE_KIND=agree|disagree|norank; FAKE_DATA is tests/gpu/data.
set -eu
events=
abort_after=
while [ $# -gt 0 ]; do
  [ "$1" = --events-out ] && events=$2
  [ "$1" = --abort-after ] && abort_after=$2
  shift
done
if [ -n "$abort_after" ]; then
  # As cuda_mlp --abort-after under traintime: the final file written, then death by SIGABRT.
  mkdir -p "$TRAINTIME_OUTPUT"
  cp "$FAKE_DATA/abort-rank.json" "$TRAINTIME_OUTPUT/rank-00000.json"
  echo "fake $(basename "$0") aborts"
  kill -ABRT $$
fi
case $(basename "$0") in
  nccl_sweep) base=sweep ;;
  *) base=${FAKE_KIND:-agree} ;;
esac
[ "${FAKE_KIND:-agree}" = norank ] && base=agree
mkdir -p "$TRAINTIME_OUTPUT"
[ "${FAKE_KIND:-agree}" = norank ] || cp "$FAKE_DATA/$base-rank.json" "$TRAINTIME_OUTPUT/rank-00000.json"
cp "$FAKE_DATA/$base-events.json" "$(echo "$events" | sed 's/%r/0/')"
# The validation records fixtures for some runs only (TRAINTIME_RECORD_FIXTURE empty otherwise).
[ -z "${TRAINTIME_RECORD_FIXTURE:-}" ] || echo "fake activity buffer" >"$TRAINTIME_RECORD_FIXTURE/activity-0.bin"
echo "fake $(basename "$0") ran"
