"""scripts/ci_times.py, the phase table .ci/run prints (docs/ci.md): judged on a hand-made phase
file and hand-made test times, so no CI run is needed."""
from __future__ import annotations

from pathlib import Path

from testlib import SOURCE_DIR, load_module

ci_times = load_module(SOURCE_DIR / "scripts" / "ci_times.py", "ci_times")


def test_table_names_every_failed_test_and_the_failed_phase() -> None:
    tests = [ci_times.TestTime("slow_ok", 30.0, "run", ["e2e"]),
             ci_times.TestTime("fast_broken", 0.5, "fail", ["unit"]),
             ci_times.TestTime("skipped", 0.0, "notrun", ["unit"])]
    phases = [ci_times.Phase("test.sh: build (Release, -Werror)", 100.0, 0, cpu=180.0, cache_hits=9,
                             cache_misses=1),
              ci_times.Phase("test.sh: ctest", 40.0, 8, Path("build"), slowest=1, cpu=60.0, tests=tests)]
    lines = ci_times.table(phases, 150.0, None)
    text = "\n".join(lines)
    # A failed test too fast to be among the slowest is still named.
    assert "    1 failed: fast_broken" in lines, text
    assert "3 tests, 30.5 test-seconds (1 not run)" in text, text
    assert "ccache: 9 of 10 compiles from the cache" in text, text
    build = next(line for line in lines if line.startswith("test.sh: build"))
    assert build.split()[4:7] == ["100.0", "66.7%", "1.80"], build
    assert "(between phases)" in text and "10.0" in next(line for line in lines if line.startswith("(between")), text
    assert lines[-1].startswith("total") and "2.5 min of 90" in lines[-1], lines[-1]
    # The last line names the failed test too: a CI log shown only in part keeps its end.
    assert lines[-1].endswith("FAILED: test.sh: ctest [fast_broken]"), lines[-1]


def test_table_of_a_clean_run_says_every_phase_passed() -> None:
    phases = [ci_times.Phase("fuzz: build", 12.0, 0), ci_times.Phase("fuzz: fuzz_config", 20.0, 0)]
    lines = ci_times.table(phases, None, None)
    assert lines[-1].endswith("every phase passed"), lines[-1]
    assert not any("failed:" in line for line in lines), lines
