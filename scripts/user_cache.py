"""Where traintime's scripts keep what they download or make once per pin, shared by every
checkout and build folder of this user: ~/.cache/traintime ($XDG_CACHE_HOME/traintime when set).
scripts/pyenv.py (the PyPI environment), fetch-cupti-releases.py (CUPTI wheels) and
fetch-nccl-releases.py (unpacked NCCL releases) use it; build.sh keeps ccache's objects there too."""
from __future__ import annotations

import os
from pathlib import Path


def traintime_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "traintime"
