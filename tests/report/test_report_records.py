"""traintime-report reads the always-current records (rank-*.live) a killed process leaves, built
here byte by byte from the layout docs/schema.md documents (not by the library's writer), beside
the golden rank files."""
from __future__ import annotations

import json
import struct
from pathlib import Path

from reportlib import GOLDEN, copy_golden, summary

HEADER = 4096
SIGABRT = 6


def record(doc: dict, steps: int | None, signal: int = 0, current: int = 0) -> bytes:
    """A record whose slot `current` holds doc; the other slot holds a torn rewrite."""
    text = json.dumps(doc).encode()
    cap = len(text) + 64
    offsets = (HEADER, HEADER + cap)
    lengths = [0, 0]
    lengths[current] = len(text)
    lengths[1 - current] = 7
    blocks = [b"\0" * 72, b"\0" * 72]
    steps_current = 2
    if steps is not None:  # count, samples, tokens, measured, wall ns, min, max, samples, tokens
        blocks[1] = struct.pack("<9Q", steps, steps * 8, steps * 64, steps - 2, (steps - 2) * 10**6,
                                10**6, 10**6, (steps - 2) * 8, (steps - 2) * 64)
        steps_current = 1
    head = b"TTLIVE\n\0" + struct.pack("<QQQ", 1, HEADER, current) + struct.pack("<2Q", *offsets) + \
        struct.pack("<2Q", *lengths) + struct.pack("<2Q", cap, cap) + struct.pack("<QQ", signal, steps_current) + \
        blocks[0] + blocks[1]
    body = bytearray(HEADER + 2 * cap)
    body[:len(head)] = head
    body[offsets[current]:offsets[current] + len(text)] = text
    body[offsets[1 - current]:offsets[1 - current] + 7] = b'{"sche'[:7].ljust(7, b" ")
    return bytes(body)


def test_a_killed_rank_is_read_from_its_record(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    doc = json.loads((d / "rank-00002.json").read_text())
    (d / "rank-00002.json").unlink()
    (d / "rank-00002.live").write_bytes(record(doc, doc["steps"]["count"] + 5, current=1))
    s, proc = summary(build_dir, d)
    assert proc.returncode == 0, proc.stderr
    assert s["ranks"] == 3 and s["problems"] == [], (s["ranks"], s["problems"])
    rank2 = next(r for r in s["per_rank"] if r["rank"] == 2)
    assert rank2["steps"] == doc["steps"]["count"] + 5 and rank2["file"].endswith("rank-00002.live"), rank2


def test_a_record_beside_a_rank_file_wins_only_with_more_steps(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    doc = json.loads((GOLDEN / "rank-00001.json").read_text())
    steps = doc["steps"]["count"]
    (d / "rank-00001.live").write_bytes(record(doc, steps + 3, signal=SIGABRT))
    s, _ = summary(build_dir, d)
    rank1 = next(r for r in s["per_rank"] if r["rank"] == 1)
    assert s["ranks"] == 3 and rank1["steps"] == steps + 3 and rank1["file"].endswith(".live"), rank1
    assert s["problems"] == [], s["problems"]  # one rank, not a duplicate
    (d / "rank-00001.live").write_bytes(record(doc, steps))  # no step ahead: the rank file
    s, _ = summary(build_dir, d)
    rank1 = next(r for r in s["per_rank"] if r["rank"] == 1)
    assert rank1["file"].endswith("rank-00001.json"), rank1


def test_a_record_without_a_complete_slot_is_named(build_dir: Path, tmp_path: Path) -> None:
    d = copy_golden(tmp_path / "job")
    doc = json.loads((d / "rank-00002.json").read_text())
    (d / "rank-00002.json").unlink()
    raw = bytearray(record(doc, None))
    raw[24:32] = struct.pack("<Q", 2)  # current: none yet (killed at its very start)
    (d / "rank-00002.live").write_bytes(bytes(raw))
    s, proc = summary(build_dir, d)
    assert s["ranks"] == 2 and s["missing_ranks"] == [2], s
    msgs = {Path(p["file"]).name: p["problem"] for p in s["problems"]}
    assert "no complete rank file" in msgs["rank-00002.live"], msgs
