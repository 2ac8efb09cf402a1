"""Every include points down the layers of docs/architecture.md.

Reads the project's own #include lines (quoted or angled "traintime/..." headers) in each source
folder and fails on any that reaches a folder the layer may not depend on. The allowed edges are
written here by hand from docs/architecture.md, not derived from the code.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# folder -> folders whose headers it may include (besides its own)
ALLOWED: dict[str, set[str]] = {
    "annotate": set(),
    "core": set(),
    "support": {"core"},
    "cupti": {"core", "support"},
    "nccl": {"core", "support"},
    "nvtx": {"annotate", "core", "support"},
    "preload": {"annotate", "core", "support", "cupti", "nccl", "nvtx"},
}

# A public header "traintime/<module>/x.h" belongs to <module>; "traintime/traintime.h" and
# "traintime/detail/..." to annotate.
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


def module_of_include(path: str, including_folder: str) -> str | None:
    parts = path.split("/")
    if parts[0] == "traintime":
        if len(parts) == 2 or parts[1] == "detail":
            return "annotate"
        return parts[1]
    return None  # system header or a file of the including folder's own src/


def private_headers() -> dict[str, str]:
    """Bare header names ("session.h") -> the folder whose src/ (or root) defines them."""
    owners: dict[str, str] = {}
    for folder in ALLOWED:
        for header in (ROOT / folder).rglob("*.h"):
            if "include" not in header.relative_to(ROOT / folder).parts:
                owners.setdefault(header.name, folder)
    return owners


def sources(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in {".h", ".cpp", ".c", ".hpp"})


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_includes_point_down(folder: str) -> None:
    owners = private_headers()
    bad: list[str] = []
    for source in sources(folder):
        for included in INCLUDE.findall(source.read_text(errors="replace")):
            target = module_of_include(included, folder)
            if target is None and "/" not in included and included in owners:
                target = owners[included]
            if target is None or target == folder:
                continue
            if target not in ALLOWED[folder]:
                bad.append(f"{source.relative_to(ROOT)} includes {included} ({target})")
    assert not bad, "includes that cross a layer upwards or sideways:\n" + "\n".join(bad)


def test_every_layer_folder_exists() -> None:
    # A renamed folder would make the check above pass vacuously.
    for folder in ALLOWED:
        assert sources(folder), f"{folder}/ has no sources: update ALLOWED with the new layout"


def test_a_crossing_include_is_caught(tmp_path: Path) -> None:
    # The check must be able to fail: a core file naming a preload header is a crossing.
    assert module_of_include("traintime/cupti/gpu_capture.h", "core") == "cupti"
    assert "cupti" not in ALLOWED["core"]
    assert module_of_include("traintime/traintime.h", "nvtx") == "annotate"
