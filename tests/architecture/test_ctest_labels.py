"""The guard of CI's time (docs/ci.md): every CTest test of the build carries a label of the table
in tests/CMakeLists.txt (TRAINTIME_TEST_LABELS, passed here as TT_TEST_LABELS) and a TIMEOUT that
no label of it allows less than. Tests are read from CTest itself (`ctest --show-only=json-v1`),
so Catch2 test cases discovered at build time are judged too."""
from __future__ import annotations

import os
from typing import Any

from testlib import SOURCE_DIR, load_module

ci_times = load_module(SOURCE_DIR / "scripts" / "ci_times.py", "ci_times")
HOW = "tests/CMakeLists.txt and docs/ci.md say how to register a test"


def allowances(table: str) -> dict[str, float]:
    """'unit:60,e2e:600' -> {'unit': 60.0, 'e2e': 600.0}."""
    out = {}
    for entry in filter(None, table.split(",")):
        label, _, seconds = entry.partition(":")
        out[label] = float(seconds)
    return out


def problems(tests: list[dict[str, Any]], allowed: dict[str, float]) -> list[str]:
    """One line per test that breaks the rule: no label, a label not in the table, no TIMEOUT, or a
    TIMEOUT above what one of its labels allows."""
    out = []
    for t in tests:
        name, labels, timeout, where = t["name"], t["labels"], t["timeout"], t["where"]
        unknown = [label for label in labels if label not in allowed]
        if not labels:
            out.append(f"{name} ({where}) has no label: give it LABELS from TRAINTIME_TEST_LABELS")
        elif unknown:
            out.append(f"{name} ({where}) has label(s) {', '.join(unknown)} that TRAINTIME_TEST_LABELS "
                       f"does not list ({', '.join(allowed)})")
        if not timeout:
            out.append(f"{name} ({where}) has no TIMEOUT: give it one its labels allow")
            continue
        known = [label for label in labels if label in allowed]
        if known:
            strictest = min(known, key=lambda label: allowed[label])
            if timeout > allowed[strictest]:
                out.append(f"{name} ({where}) has TIMEOUT {timeout:g} s; its label {strictest} allows "
                           f"{allowed[strictest]:g} s: make it faster, or label it for what it is")
    return out


def test_every_ctest_test_has_a_label_and_a_timeout_it_allows(build_dir) -> None:
    table = os.environ.get("TT_TEST_LABELS", "")
    allowed = allowances(table)
    assert allowed, "TT_TEST_LABELS is not set: run this test through CTest (tests/architecture/CMakeLists.txt)"
    tests = ci_times.ctest_tests(build_dir)
    assert len(tests) > 100, f"CTest lists only {len(tests)} tests in {build_dir}: is the build complete?"
    found = problems(tests, allowed)
    assert not found, "\n  ".join([f"{len(found)} test(s) break the label rule ({HOW}):"] + found)


def test_guard_names_each_test_that_breaks_the_rule() -> None:
    allowed = allowances("unit:60,e2e:600")
    tests = [
        {"name": "ok_unit", "labels": ["unit"], "timeout": 60.0, "where": "a:1"},
        {"name": "ok_e2e", "labels": ["e2e"], "timeout": 600.0, "where": "a:2"},
        {"name": "bare", "labels": [], "timeout": 30.0, "where": "a:3"},
        {"name": "typo", "labels": ["unti"], "timeout": 30.0, "where": "a:4"},
        {"name": "no_timeout", "labels": ["unit"], "timeout": None, "where": "a:5"},
        {"name": "too_long", "labels": ["unit"], "timeout": 61.0, "where": "a:6"},
        # Two labels: the stricter one rules.
        {"name": "two_labels", "labels": ["e2e", "unit"], "timeout": 300.0, "where": "a:7"},
    ]
    found = problems(tests, allowed)
    assert found == [
        "bare (a:3) has no label: give it LABELS from TRAINTIME_TEST_LABELS",
        "typo (a:4) has label(s) unti that TRAINTIME_TEST_LABELS does not list (unit, e2e)",
        "no_timeout (a:5) has no TIMEOUT: give it one its labels allow",
        "too_long (a:6) has TIMEOUT 61 s; its label unit allows 60 s: make it faster, or label it for what it is",
        "two_labels (a:7) has TIMEOUT 300 s; its label unit allows 60 s: make it faster, or label it for what it is",
    ], found


def test_label_table_is_read_as_written() -> None:
    assert allowances("unit:60,e2e:600,") == {"unit": 60.0, "e2e": 600.0}
