"""The version is written in two places, the CMake project (the library, traintime.pc) and the
Python package's pyproject.toml; they must say the same."""
from __future__ import annotations

import re
import tomllib  # Python 3.11 (Debian 12)
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cmake_version(text: str) -> str | None:
    m = re.search(r"^project\(traintime\s+VERSION\s+([0-9.]+)", text, re.MULTILINE)
    return m.group(1) if m else None


def test_cmake_and_python_package_versions_agree() -> None:
    cmake = cmake_version((ROOT / "CMakeLists.txt").read_text())
    python = tomllib.loads((ROOT / "annotate" / "python" / "pyproject.toml").read_text())["project"]["version"]
    assert cmake is not None, "no `project(traintime VERSION x.y.z ...)` in CMakeLists.txt"
    assert cmake == python, (f"CMakeLists.txt says {cmake}, annotate/python/pyproject.toml says {python}: "
                             "change both together")


def test_a_version_mismatch_would_be_read() -> None:
    assert cmake_version("cmake_minimum_required(VERSION 3.22)\nproject(traintime VERSION 1.2.3 LANGUAGES C)\n") == "1.2.3"
