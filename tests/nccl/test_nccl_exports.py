"""Every entry point of a real NCCL is either wrapped by libtraintime.so or reviewed as launching
no GPU work (nccl_exports_without_gpu_work.txt), so a new NCCL's new way to launch a collective
cannot go uncounted unnoticed; and the released library, loaded RTLD_LOCAL under the preload,
gets every call through the wrappers with exactly its own answer (real_nccl_rtld_local.cpp,
2.32's *Config and one-sided calls included, on a NULL communicator: no GPU needed). The libraries are PyPI's nvidia-nccl-cu12 wheels, unpacked by
scripts/fetch-nccl-releases.py (scripts/test.sh runs it) and listed in <build>/nccl-releases. A release
that could not be downloaded fails the test under TRAINTIME_CI=1 and leaves it Not Run elsewhere.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from testlib import SOURCE_DIR, Checks, clean_env, load_module, missing_dependency

HERE = Path(__file__).resolve().parent
REVIEWED = HERE / "nccl_exports_without_gpu_work.txt"
# The releases scripts/fetch-nccl-releases.py fetches: each has a test function below.
RELEASES = load_module(SOURCE_DIR / "scripts" / "fetch-nccl-releases.py", "fetch_nccl_releases").RELEASES


def reviewed() -> set[str]:
    names = set()
    for line in REVIEWED.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            names.add(line.split()[0])
    return names


def defined_nccl_symbols(lib: Path) -> set[str]:
    """Public entry points a library exports: nccl* (pnccl* are NCCL's profiling aliases of them)."""
    p = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    return {parts[2] for parts in (line.split() for line in p.stdout.splitlines())
            if len(parts) >= 3 and parts[2].startswith("nccl")}


def stream_entry_points(header: Path) -> set[str]:
    """nccl.h's functions that take a cudaStream_t: each enqueues work on a stream."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", header.read_text(encoding="utf-8"), flags=re.S)
    return {m.group(1) for m in re.finditer(r"\b(nccl\w+)\s*\(([^;{]*)\)\s*;", text)
            if "cudaStream_t" in m.group(2)}


def release(build_dir: Path, version: str) -> tuple[Path, Path]:
    listing = build_dir / "nccl-releases" / "releases.txt"
    fetch = f"scripts/fetch-nccl-releases.py {build_dir / 'nccl-releases'}"
    if not listing.is_file():
        missing_dependency(f"{listing} is missing: run {fetch} (needs PyPI)")
    for line in listing.read_text(encoding="utf-8").splitlines():
        fields = line.split(maxsplit=2)
        if fields and fields[0] == version:
            if fields[1] == "missing":
                missing_dependency(f"NCCL {version} was not fetched ({fields[2]}): run {fetch}")
            return Path(fields[1]), Path(fields[2])
    missing_dependency(f"{listing} has no NCCL {version}: run {fetch}")


def check_release(build_dir: Path, version: str) -> None:
    lib, header = release(build_dir, version)
    c = Checks()
    wrapped = defined_nccl_symbols(build_dir / "lib" / "libtraintime.so")
    exported = defined_nccl_symbols(lib)
    c.check(len(exported) > 30, f"NCCL {version}: only {len(exported)} nccl* exports read from {lib}")
    listed = reviewed()
    for name in sorted(exported - wrapped - listed):
        c.check(False, f"NCCL {version} exports {name}, which libtraintime.so does not wrap and "
                       f"{REVIEWED.name} does not list: wrap it if it enqueues work, else review it there")
    for name in sorted(listed & wrapped):
        c.check(False, f"{name} is wrapped and also listed in {REVIEWED.name} as launching no work")
    streams = stream_entry_points(header)
    c.check(len(streams) >= 11, f"NCCL {version}: only {sorted(streams)} take a stream in {header}")
    for name in sorted(streams - wrapped):
        c.check(False, f"NCCL {version}'s {name} takes a cudaStream_t but is not wrapped")
    c.done()


def test_nccl_2_28_9_entry_points_are_wrapped_or_reviewed(build_dir: Path) -> None:
    check_release(build_dir, "2.28.9")  # the NCCL torch 2.11 pins


def test_nccl_2_32_3_entry_points_are_wrapped_or_reviewed(build_dir: Path) -> None:
    check_release(build_dir, "2.32.3")


def check_pass_through(build_dir: Path, version: str) -> None:
    lib, _ = release(build_dir, version)
    with tempfile.TemporaryDirectory(prefix="nccl_release_") as out:
        env = clean_env({"LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"), "TRAINTIME_OUTPUT": out})
        p = subprocess.run([str(build_dir / "tests" / "nccl" / "real_nccl_rtld_local"), str(lib)], env=env,
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"NCCL {version} under the preload (exit {p.returncode}):\n{p.stdout}{p.stderr}"
    if version != "2.28.9":
        assert "ncclAllReduceConfig on a NULL communicator" in p.stdout, p.stdout


def test_nccl_2_28_9_calls_reach_the_real_library(build_dir: Path) -> None:
    check_pass_through(build_dir, "2.28.9")


def test_nccl_2_32_3_calls_reach_the_real_library(build_dir: Path) -> None:
    check_pass_through(build_dir, "2.32.3")


def test_reviewed_list_names_only_real_entry_points(build_dir: Path) -> None:
    """A stale entry (an entry point no checked release exports) would hide nothing, but says
    something untrue: every listed name is exported by one of the releases. And every fetched
    release has its test here."""
    c = Checks()
    for version in RELEASES:
        name = f"test_nccl_{version.replace('.', '_')}_entry_points_are_wrapped_or_reviewed"
        c.check(name in globals(), f"NCCL {version} is fetched but has no {name}")
    exported: set[str] = set()
    for version in RELEASES:
        exported |= defined_nccl_symbols(release(build_dir, version)[0])
    stale = sorted(reviewed() - exported)
    c.check(not stale, f"{REVIEWED.name} lists entry points no checked NCCL exports: {stale}")
    c.done()
