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
    "null": {"core", "modules"},  # the template module: what the next API family copies
    "nvml": {"core", "support"},
    # The module table and the formats' lookup: names the modules, includes none of their headers.
    "modules": {"core"},
    "preload": {"annotate", "core", "support", "cupti", "nccl", "nvtx", "null", "nvml", "modules"},
    # traintime-report reads rank files through core's one reader, and the modules' formats
    # (counters, warnings' text, data sections) through the library both it and libtraintime.so
    # link: each module's public format headers (below, from the table).
    "tools": {"core", "modules", "cupti", "nccl", "nvtx", "null", "nvml"},
}

# Every module of the module table (modules/include/traintime/modules/module_table.h): one not
# named above (a new API family) may include core, support and modules (its report half's
# interface), and the composition root and traintime-report (its format) it.
MODULE_TABLE = ROOT / "modules" / "include" / "traintime" / "modules" / "module_table.h"
# docs/design.md's table states the rules above; a module added by its table line alone is covered
# there by the modules row's rule, not by a row of its own.
DOCUMENTED: dict[str, set[str]] = {folder: set(rules) for folder, rules in ALLOWED.items()}
for _module in re.findall(r"^  X\((\w+)\)", MODULE_TABLE.read_text(), re.MULTILINE):
    ALLOWED.setdefault(_module, {"core", "support", "modules"})
    ALLOWED["preload"].add(_module)
    ALLOWED["tools"].add(_module)

# A public header "traintime/<module>/x.h" belongs to <module>; "traintime/traintime.h" and
# "traintime/detail/..." to annotate.
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


def module_of_include(path: str) -> str | None:
    parts = path.split("/")
    if parts[0] == "traintime":
        if len(parts) == 2 or parts[1] == "detail":
            return "annotate"
        return parts[1]
    return None  # system header or a file of the including folder's own src/


def sources(root: Path, folder: str) -> list[Path]:
    return sorted(p for p in (root / folder).rglob("*") if p.suffix in {".h", ".cpp", ".c", ".hpp"})


def private_headers(root: Path, folder: str) -> dict[str, set[str]]:
    """Bare header names ("session.h") -> the folders whose private files (not under include/)
    define them."""
    owners: dict[str, set[str]] = {}
    for other in ALLOWED:
        if (root / other).is_dir():
            for header in (root / other).rglob("*.h"):
                if "include" not in header.relative_to(root / other).parts:
                    owners.setdefault(header.name, set()).add(other)
    return owners


def crossings(root: Path, folder: str) -> list[str]:
    """Every include in root/folder that reaches a folder ALLOWED[folder] does not name."""
    owners = private_headers(root, folder)
    bad: list[str] = []
    for source in sources(root, folder):
        for included in INCLUDE.findall(source.read_text(errors="replace")):
            target = module_of_include(included)
            if target is None and "/" not in included and included in owners:
                # A bare name is the folder's own header when it has one by that name.
                found = owners[included]
                target = folder if folder in found else sorted(found)[0]
            if target is None or target == folder:
                continue
            if target not in ALLOWED[folder]:
                bad.append(f"{source.relative_to(root)} includes {included} ({target})")
    return bad


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_includes_point_down(folder: str) -> None:
    bad = crossings(ROOT, folder)
    assert not bad, "includes that cross a layer upwards or sideways:\n" + "\n".join(bad)


def test_every_layer_folder_exists() -> None:
    # A renamed folder would make the check above pass vacuously.
    for folder in ALLOWED:
        assert sources(ROOT, folder), f"{folder}/ has no sources: update ALLOWED with the new layout"


def test_a_crossing_include_is_caught(tmp_path: Path) -> None:
    # The scan must be able to fail: run it on a planted tree with one crossing of each kind.
    def plant(rel: str, text: str) -> None:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)

    plant("preload/session.h", "#pragma once\n")
    plant("cupti/include/traintime/cupti/gpu_capture.h", "#pragma once\n")
    plant("core/src/up.cpp", '#include "traintime/cupti/gpu_capture.h"\n')     # public header, upwards
    plant("core/src/private.cpp", '#include "session.h"\n')                   # preload's private header
    plant("tools/report/main.cpp", '#include <traintime/traintime.h>\n')        # sideways into annotate
    plant("core/src/fine.cpp", '#include <vector>\n#include "traintime/core/activity.h"\n')
    plant("preload/session.cpp", '#include "session.h"\n#include "traintime/cupti/gpu_capture.h"\n')
    assert crossings(tmp_path, "core") == [
        "core/src/private.cpp includes session.h (preload)",
        "core/src/up.cpp includes traintime/cupti/gpu_capture.h (cupti)",
    ]
    assert crossings(tmp_path, "tools") == ["tools/report/main.cpp includes traintime/traintime.h (annotate)"]
    assert crossings(tmp_path, "preload") == []  # its own header and a layer below


def named_paths(doc: str) -> list[str]:
    """The repository paths a document names in `code` spans: a span with a slash that is not a
    placeholder (<family>, …), a scope (::) or a bare module folder such as `src/`."""
    spans = re.findall(r"`([^`\s]+)`", doc)
    return sorted({s for s in spans if "/" in s.strip("/") and not re.search(r"[<>…*]|::|\.\.\.", s)})


def test_paths_in_architecture_md_exist() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    paths = named_paths(doc)
    assert len(paths) >= 10, f"only {paths} found: the pattern no longer reads the document"
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, "docs/architecture.md names paths that do not exist: " + ", ".join(missing)


def test_a_missing_path_in_a_document_is_caught() -> None:
    doc = "See `core/src/rank_file_json.cpp`, `core/no_such.h`, `<family>/src/x.cpp` and `src/`."
    assert named_paths(doc) == ["core/no_such.h", "core/src/rank_file_json.cpp"]
    assert not (ROOT / "core/no_such.h").exists()
