"""check_replay.py judges a real-GPU fixture's replay against the CUDA events of the recording
run (issue 11 item 5: the expected numbers come from events, not only from traintime's own rank
file). Hand-made replay outputs and events files; the GPU recordings themselves are replayed by
the capture_replay_* tests once scripts/gpu-validate.sh has committed them."""
from __future__ import annotations

import json
from pathlib import Path

from testlib import SOURCE_DIR, load_module

check_replay = load_module(SOURCE_DIR / "tests" / "cupti" / "check_replay.py", "check_replay")


def events(regions: list[tuple[str, float, int]], **extra) -> dict:
    return {"schema": "traintime-example-events/1", "world_size": 1, "comm": [],
            "regions": [{"path": p, "entries": n, "total_ms": ms} for p, ms, n in regions], **extra}


def replay(regions: list[tuple[str, float, int]], unattributed: int = 0) -> dict:
    return {"categories": {"unattributed": {"count": unattributed}},
            "regions": [{"path": p, "count": 0, "gpu_span_ns": int(ms * 1e6), "kernels": k}
                        for p, ms, k in regions]}


def fixture_with(tmp_path: Path, ev: dict, in_run_folder: bool) -> Path:
    run = tmp_path / "gpu-20261122" / "torch_regions"
    fixture = run / "pid123"
    fixture.mkdir(parents=True)
    (run if in_run_folder else fixture).joinpath("events.json").write_text(json.dumps(ev))
    return fixture


def test_no_events_file_adds_no_check(tmp_path: Path) -> None:
    (tmp_path / "pid1").mkdir()
    assert check_replay.check_events(tmp_path / "pid1", replay([("forward", 50.0, 10)])) == []


def test_replay_within_one_percent_of_the_events_passes(tmp_path: Path) -> None:
    fx = fixture_with(tmp_path, events([("forward", 50.0, 20), ("backward", 100.0, 20)]), True)
    got = replay([("forward", 50.4, 100), ("backward", 99.2, 200)])  # +0.8 %, -0.8 %
    assert check_replay.check_events(fx, got) == []


def test_replay_off_by_more_than_one_percent_fails(tmp_path: Path) -> None:
    fx = fixture_with(tmp_path, events([("forward", 50.0, 20), ("backward", 100.0, 20)]), False)
    got = replay([("forward", 50.0, 100), ("backward", 98.5, 200)])  # -1.5 %
    failures = check_replay.check_events(fx, got)
    assert len(failures) == 1 and "1 region(s) disagree" in failures[0]


def test_events_with_nothing_to_judge_fail(tmp_path: Path) -> None:
    fx = fixture_with(tmp_path, events([("io", 0.5, 20)]), True)  # 25 us per entry: not judged
    failures = check_replay.check_events(fx, replay([("io", 0.5, 40)]))
    assert len(failures) == 1 and "no region of >= 1 ms" in failures[0]


def test_graph_replays_are_judged_against_the_captured_regions(tmp_path: Path) -> None:
    graph = {"captured_paths": ["forward", "backward"], "replays": 23, "total_ms": 150.0}
    ev = events([("optimizer", 30.0, 20)], graph_replay=graph)
    fx = fixture_with(tmp_path, ev, True)
    good = replay([("optimizer", 30.0, 40), ("forward", 50.0, 230), ("backward", 99.5, 460),
                   ("replay", 0.0, 0)])
    assert check_replay.check_events(fx, good) == []
    misplaced = replay([("optimizer", 30.0, 40), ("forward", 50.0, 230), ("backward", 99.5, 460),
                        ("replay", 0.0, 12)])
    failures = check_replay.check_events(fx, misplaced)
    assert len(failures) == 1 and "graph replays disagree" in failures[0]
