"""Where the wheel keeps its binaries and the library's config table, inside this package:
_lib/libtraintime.so, _bin/traintime-report and _config_table.json (CMakeLists.txt installs them
there). The pure-Python install of annotate/python has none of them; a source checkout's
package on PYTHONPATH finds them in the installed wheel."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE_DIR = Path(__file__).resolve().parent


def _installed(relative: str) -> Optional[Path]:
    """A file of the wheel: beside this package, else in an installed distribution that has it
    (when a source checkout's annotate/python on PYTHONPATH shadows the installed package; that
    folder may hold a traintime.egg-info of its own, left by a pip install from it, so the first
    distribution found is not enough)."""
    here = PACKAGE_DIR / relative
    if here.is_file():
        return here
    try:
        from importlib.metadata import distributions
    except ImportError:
        return None
    for dist in distributions():
        if (dist.metadata["Name"] or "").lower() == "traintime":
            there = Path(str(dist.locate_file(f"traintime/{relative}")))
            if there.is_file():
                return there
    return None


def library() -> Optional[Path]:
    return _installed("_lib/libtraintime.so")


def report_program() -> Optional[Path]:
    return _installed("_bin/traintime-report")


@functools.lru_cache(maxsize=1)
def config_table() -> List[Dict[str, str]]:
    """The library's settings (core/src/config.cpp), each {name, default, doc}; empty without the
    wheel's table."""
    table = _installed("_config_table.json")
    try:
        return json.loads(table.read_text()) if table else []
    except (OSError, ValueError):
        return []


def config_names() -> Set[str]:
    return {row["name"] for row in config_table()}
