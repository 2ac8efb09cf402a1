"""The version is written in three places, the CMake project (the library, traintime.pc,
`traintime-report --version`), the Python package's pyproject.toml and its `traintime.__version__`;
they must say the same."""
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


def python_package_version(text: str) -> str | None:
    m = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.MULTILINE)
    return m.group(1) if m else None


def test_traintime_version_is_the_cmake_version() -> None:
    cmake = cmake_version((ROOT / "CMakeLists.txt").read_text())
    package = python_package_version((ROOT / "annotate" / "python" / "traintime" / "__init__.py").read_text())
    assert package is not None, "no `__version__ = \"x.y.z\"` in annotate/python/traintime/__init__.py"
    assert package == cmake, f"traintime.__version__ is {package}, CMakeLists.txt says {cmake}: change both together"


def test_a_version_mismatch_would_be_read() -> None:
    assert cmake_version("cmake_minimum_required(VERSION 3.22)\nproject(traintime VERSION 1.2.3 LANGUAGES C)\n") == "1.2.3"
    assert python_package_version('"""doc"""\n__version__ = "1.2.4"\n') == "1.2.4"
