"""NCCL the way PyTorch ships it (issue 10 item 4), with libtraintime.so preloaded.

static_nccl_caller (static_nccl_caller.cpp) loads a library that carries NCCL inside it (the
fake NCCL compiled into tests/nccl/static_host/libtt_test_static_nccl_host.so) with RTLD_LOCAL,
as Python loads libtorch_cuda.so, and runs a communicator init, three AllReduces, a grouped
AllGather and a destroy from inside it. The wrappers must hand every call to that library's own
NCCL, ask it (not another NCCL) for the communicator's size and rank, and count the calls.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from testlib import Checks, clean_env, load_json


def run(build: Path, tmp: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    here = build / "tests" / "nccl"
    out = tmp / "out"
    env = clean_env({"LD_PRELOAD": str(build / "lib" / "libtraintime.so"),
                     "TRAINTIME_OUTPUT": str(out)})
    p = subprocess.run([str(here / "static_nccl_caller"), mode,
                        str(here / "static_host" / "libtt_test_static_nccl_host.so"),
                        str(here / "fake" / "libnccl.so.2")],
                       env=env, capture_output=True, text=True, timeout=30)
    docs = [load_json(f) for f in sorted(out.glob("rank-*.json"))] if out.exists() else []
    return p, docs


def check_counted(c: Checks, docs: list[dict]) -> None:
    if not c.check(len(docs) == 1, f"one rank file expected, found {len(docs)}"):
        return
    doc = docs[0]
    comms = doc.get("communicators", [])
    c.check(len(comms) == 1 and comms[0].get("size") == 4 and comms[0].get("rank") == 2,
            f"the communicator must be registered with the host NCCL's size 4 and rank 2: {comms}")
    rows = {row["op"]: row for row in doc.get("comm", []) if row.get("calls")}
    allreduce = rows.get("AllReduce", {})
    c.check(allreduce.get("calls") == 3 and allreduce.get("bytes") == 3 * 1024 * 4,
            f"3 AllReduce calls of 4096 bytes expected: {allreduce}")
    allgather = rows.get("AllGather", {})
    c.check(allgather.get("calls") == 1 and allgather.get("bytes") == 256 * 4 * 4,
            f"1 AllGather of 256 floats x 4 ranks expected: {allgather}")


def test_static_nccl_in_rtld_local_library_reaches_its_own_nccl(build_dir: Path, tmp_path: Path) -> None:
    p, docs = run(build_dir, tmp_path, "static")
    c = Checks()
    c.check(p.returncode == 0, f"the host library's NCCL calls failed under the preload: {p.stdout}{p.stderr}")
    c.check(p.stderr == "", f"nothing may be printed: {p.stderr!r}")
    check_counted(c, docs)
    c.done()


def test_static_nccl_is_preferred_over_another_nccl_in_the_global_scope(build_dir: Path, tmp_path: Path) -> None:
    p, docs = run(build_dir, tmp_path, "static+other")
    c = Checks()
    c.check(p.returncode == 0, f"calls went to the wrong NCCL or failed: {p.stdout}{p.stderr}")
    check_counted(c, docs)
    c.done()


def test_no_nccl_anywhere_fails_the_call_and_warns_once(build_dir: Path, tmp_path: Path) -> None:
    p, _ = run(build_dir, tmp_path, "none")
    c = Checks()
    c.check(p.returncode == 0, f"expected ncclSystemError with errno ENOSYS twice: {p.stdout}")
    lines = [line for line in p.stderr.splitlines() if "ncclGroupStart" in line]
    c.check(len(lines) == 1 and "no loaded library defines it" in lines[0],
            f"one warning naming ncclGroupStart expected: {p.stderr!r}")
    c.done()
