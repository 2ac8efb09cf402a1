"""Where the wheel keeps its binaries and the library's config table, inside this package:
_lib/libtraintime.so, _bin/traintime-report and _config_table.json (CMakeLists.txt installs them
there). The pure-Python install of annotate/python has none of them."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE_DIR = Path(__file__).resolve().parent


def library() -> Optional[Path]:
    lib = PACKAGE_DIR / "_lib" / "libtraintime.so"
    return lib if lib.is_file() else None


def report_program() -> Optional[Path]:
    program = PACKAGE_DIR / "_bin" / "traintime-report"
    return program if program.is_file() else None


@functools.lru_cache(maxsize=1)
def config_table() -> List[Dict[str, str]]:
    """The library's settings (core/src/config.cpp), each {name, default, doc}; empty without the
    wheel's table."""
    try:
        return json.loads((PACKAGE_DIR / "_config_table.json").read_text())
    except (OSError, ValueError):
        return []


def config_names() -> Set[str]:
    return {row["name"] for row in config_table()}
