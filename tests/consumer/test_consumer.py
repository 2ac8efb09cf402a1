"""Users' builds find the installed annotation API: find_package(traintime) and pkg-config.

Installs the build tree into a temporary prefix with `cmake --install`, builds a small project
outside the source tree against it, runs the programs under LD_PRELOAD of the installed
libtraintime.so and reads the rank files they write. The same program built with
TRAINTIME_DISABLE_ANNOTATIONS must carry no dispatch code and record nothing.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

BUILD = Path(os.environ["TT_BUILD_DIR"])
HERE = Path(__file__).resolve().parent


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def clean_env() -> dict[str, str]:
    # No launcher variables: every program is rank 0 of a world of 1.
    skip = ("RANK", "WORLD_SIZE", "OMPI_", "PMIX_", "PMI_", "SLURM_", "TRAINTIME_", "LD_PRELOAD",
            "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")
    return {k: v for k, v in os.environ.items() if not k.startswith(skip)}


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("prefix")
    run(["cmake", "--install", str(BUILD), "--prefix", str(root)])
    return root


def profile(program: Path, prefix: Path, out: Path) -> Path:
    env = clean_env()
    env["LD_PRELOAD"] = str(prefix / "lib" / "libtraintime.so")
    env["TRAINTIME_OUTPUT"] = str(out)
    env["TRAINTIME_CUPTI"] = "0"
    run([str(program)], env)
    return out / "rank-00000.json"


def region(doc: dict, path: str) -> dict:
    rows = [r for r in doc["regions"] if r["path"] == path]
    assert rows, f"no region {path!r} in {[r['path'] for r in doc['regions']]}"
    return rows[0]


def test_install_lays_out_library_header_and_package_files(prefix: Path) -> None:
    for rel in ["lib/libtraintime.so", "include/traintime/traintime.h",
                "include/traintime/detail/dispatch.h", "lib/cmake/traintime/traintimeConfig.cmake",
                "lib/cmake/traintime/traintimeConfigVersion.cmake", "lib/pkgconfig/traintime.pc",
                "share/traintime/python/traintime/__init__.py"]:
        assert (prefix / rel).is_file(), f"{rel} not installed"


def test_find_package_builds_and_the_annotations_reach_the_profiler(prefix: Path,
                                                                   tmp_path: Path) -> None:
    build = tmp_path / "build"
    run(["cmake", "-S", str(HERE / "project"), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"])
    run(["cmake", "--build", str(build)])
    doc = json.loads(profile(build / "consumer", prefix, tmp_path / "out").read_text())
    assert doc["steps"]["count"] == 3
    assert region(doc, "forward")["count"] == 3
    assert region(doc, "forward/prefetch")["category"] == "io"
    assert region(doc, "optimizer")["count"] == 3 and region(doc, "optimizer")["category"] == "optimizer"


def test_compiled_out_annotations_leave_no_dispatch_and_record_nothing(prefix: Path,
                                                                      tmp_path: Path) -> None:
    build = tmp_path / "build"
    run(["cmake", "-S", str(HERE / "project"), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"])
    run(["cmake", "--build", str(build)])
    program = build / "consumer_compiled_out"
    assert b"traintime_get_api_v1" not in program.read_bytes()
    assert b"traintime_get_api_v1" in (build / "consumer").read_bytes()  # the check can fail
    out = tmp_path / "out"
    assert not profile(program, prefix, out).exists()


def test_pkg_config_gives_the_flags_of_the_installed_header(prefix: Path, tmp_path: Path) -> None:
    env = clean_env()
    env["PKG_CONFIG_PATH"] = str(prefix / "lib" / "pkgconfig")
    flags = run(["pkg-config", "--cflags", "--libs", "traintime"], env).split()
    includes = [Path(f[2:]).resolve() for f in flags if f.startswith("-I")]
    assert includes == [(prefix / "include").resolve()], flags
    exe = tmp_path / "consumer_c"
    run(["cc", "-std=c99", "-Wall", "-Werror", str(HERE / "project" / "consumer.c"), "-o", str(exe),
         *flags], env)
    doc = json.loads(profile(exe, prefix, tmp_path / "out").read_text())
    assert region(doc, "backward")["count"] == 3
    # TT_PUSH_STATIC nests like tt_push; tt_register_name keeps the category it was given.
    assert region(doc, "backward/layer")["count"] == 3 and region(doc, "backward/layer")["category"] == "backward"
    assert region(doc, "fetch")["count"] == 3 and region(doc, "fetch")["category"] == "io"
    assert doc.get("unbalanced_pops", 0) == 0
    assert doc["steps"]["samples"] == 12
    # Compiled out, the same C file still builds (the macros expand to nothing).
    run(["cc", "-std=c99", "-Wall", "-Werror", "-DTRAINTIME_DISABLE_ANNOTATIONS", str(HERE / "project" / "consumer.c"),
         "-o", str(tmp_path / "consumer_c_off"), *flags], env)
