"""The lazy GPU-capture start costs a CPU-only process nothing per step.

When another tool owns CUDA_INJECTION64_PATH, every tt_step is a point where capture may start
lazily, which means asking the loader whether libcuda.so.1 is loaded. A process that never
loads CUDA must not pay a dlopen per step: the probe is repeated only when the loader has added
an object since the last one. A preloaded counter (dlopen_counter.c) counts the probes.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from testlib import clean_env, load_json


def test_cpu_only_process_probes_for_libcuda_only_when_objects_were_loaded(build_dir: Path,
                                                                         tmp_path: Path) -> None:
    counter = build_dir / "lib" / "libtt_dlopen_counter.so"
    out = tmp_path / "out"
    count_file = tmp_path / "probes.txt"
    env = clean_env({
        "LD_PRELOAD": f"{build_dir / 'lib' / 'libtraintime.so'}:{counter}",
        # Any library that is not traintime: capture may then only start lazily.
        "CUDA_INJECTION64_PATH": str(counter),
        "TRAINTIME_OUTPUT": str(out),
        "TT_DLOPEN_COUNT_OUT": str(count_file),
    })
    steps = 2000
    run = subprocess.run([str(build_dir / "bin" / "annotated_loop"), "--steps", str(steps), "--work-us", "0"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert load_json(out / "rank-00000.json")["steps"]["count"] == steps
    probes = int(count_file.read_text())
    # One probe for the first step, then one per burst of loading at most (the program loads
    # nothing while it runs): far fewer than one per step.
    assert 1 <= probes <= 5, f"{probes} libcuda probes in {steps} steps"
