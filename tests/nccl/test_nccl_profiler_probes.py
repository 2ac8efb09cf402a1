"""The profiler plugin versions each released NCCL probes are the ones traintime declares.

NCCL finds a profiler plugin by looking up the data symbol `ncclProfiler_vN` in it, newest N first;
the names it looks up are string constants in libnccl.so.2. This reads them from PyPI's released
libraries (scripts/fetch-nccl-releases.py, the same ones test_nccl_exports.py checks), so a new
NCCL that probes a version traintime does not declare (nccl/api/traintime/nccl/
profiler_plugin_api.h) fails here instead of silently going without the plugin. A release that
could not be downloaded leaves its test Not Run (failed under TRAINTIME_CI=1).
"""
from __future__ import annotations

import re
from pathlib import Path

from testlib import SOURCE_DIR, Checks, load_module

HERE = Path(__file__).resolve().parent
EXPORTS = load_module(HERE / "test_nccl_exports.py", "test_nccl_exports")
API_HEADER = SOURCE_DIR / "nccl" / "api" / "traintime" / "nccl" / "profiler_plugin_api.h"
# The oldest version traintime offers: v1 and v2 (NCCL 2.21 ... 2.22 alone) carry no API events.
OLDEST_OFFERED = 3


def probed_versions(lib: Path) -> set[int]:
    """N of every NUL-terminated "ncclProfiler_vN" string constant in `lib`."""
    data = lib.read_bytes()
    return {int(m.group(1)) for m in re.finditer(rb"\x00ncclProfiler_v(\d+)\x00", data)}


def declared_versions() -> set[int]:
    text = API_HEADER.read_text(encoding="utf-8")
    return {int(v) for v in re.findall(r'kSymbolV\d+ = "ncclProfiler_v(\d+)"', text)}


def check_release(build_dir: Path, version: str, newest: int) -> None:
    lib, _ = EXPORTS.release(build_dir, version)
    c = Checks()
    probed = probed_versions(lib)
    c.check(probed == set(range(1, newest + 1)),
            f"NCCL {version} ({lib}) probes ncclProfiler_v{sorted(probed)}, expected v1 ... v{newest}")
    declared = declared_versions()
    c.check(declared == set(range(OLDEST_OFFERED, max(declared, default=0) + 1)),
            f"{API_HEADER.name} declares the symbols of versions {sorted(declared)}: not one run from v{OLDEST_OFFERED}")
    for v in sorted(probed - declared):
        c.check(v < OLDEST_OFFERED, f"NCCL {version} probes ncclProfiler_v{v}, which {API_HEADER.name} does not declare")
    c.done()


def test_nccl_2_28_9_probes_profiler_v5_to_v1(build_dir: Path) -> None:
    check_release(build_dir, "2.28.9", 5)  # the NCCL torch 2.11 pins


def test_nccl_2_32_3_probes_profiler_v7_to_v1(build_dir: Path) -> None:
    check_release(build_dir, "2.32.3", 7)


def test_every_fetched_release_is_checked() -> None:
    c = Checks()
    for version in EXPORTS.RELEASES:
        prefix = f"test_nccl_{version.replace('.', '_')}_probes_profiler_"
        c.check(any(name.startswith(prefix) for name in globals()), f"NCCL {version} is fetched but has no {prefix}*")
    c.done()
