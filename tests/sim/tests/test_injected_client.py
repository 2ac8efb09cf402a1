#!/usr/bin/env python3
"""SIMULATION end-to-end test of the fakes without traintime: sim_train runs with a small CUPTI
tool injected through CUDA_INJECTION64_PATH; every activity sim_train's truth counts must reach
the tool as a complete record (or be counted as dropped), in every mode.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from testlib import Checks

SIM_TRAIN = CLIENT = ""
_checks = Checks()
check = _checks.check
FAILURES = _checks.failures


def run(args: list[str], env_extra: dict[str, str]) -> tuple[Any, Any]:
    with tempfile.TemporaryDirectory() as d:
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "SIMGPU_DROP_EVERY", "SIMGPU_SLOWDOWN")}
        env.update(env_extra)
        env["CUDA_INJECTION64_PATH"] = CLIENT
        env["SIMGPU_CLIENT_OUT"] = os.path.join(d, "client.json")
        truth_path = os.path.join(d, "truth-%r.json")
        p = subprocess.run([SIM_TRAIN, "--steps", "6", *args, "--truth", truth_path], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0:
            FAILURES.append(f"{args} {env_extra}: sim_train exited {p.returncode}: {p.stderr}")
            return None, None
        with open(env["SIMGPU_CLIENT_OUT"], encoding="utf-8") as f:
            client = json.load(f)
        with open(truth_path.replace("%r", env_extra.get("RANK", "0")), encoding="utf-8") as f:
            truth = json.load(f)
        return client, truth


def test_sim_train_injected_cupti_client_sees_every_activity(build_dir: Path) -> None:
    global SIM_TRAIN, CLIENT
    SIM_TRAIN = str(build_dir / "bin" / "sim_train")
    CLIENT = str(build_dir / "tests" / "sim" / "libsimgpu_test_cupti_client.so")
    cases = [([], {}), (["--graphs"], {}), (["--nvtx"], {}),
             ([], {"RANK": "3", "WORLD_SIZE": "4", "SIMGPU_SLOWDOWN": "0:1.2"}),
             ([], {"SIMGPU_DROP_EVERY": "7"})]
    for args, env in cases:
        client, truth = run(args, env)
        if client is None:
            continue
        name = f"{args} {env}"
        cats = truth["categories"].values()
        activities = sum(c["count"] for c in cats)
        records = client["kernels"] + client["memcpys"] + client["memsets"]
        check(client["incomplete"] == 0, f"{name}: incomplete records after a synchronized exit")
        check(records + client["dropped"] == activities,
              f"{name}: {records} records + {client['dropped']} dropped != {activities} activities")
        if "SIMGPU_DROP_EVERY" in env:
            check(client["dropped"] == activities // 7, f"{name}: dropped {client['dropped']}")
            continue
        check(client["gpu_sum_ns"] == sum(c["gpu_sum_ns"] for c in cats), f"{name}: GPU time differs from the truth")
        copies = truth["memcpy"].values()
        check(client["memcpys"] == sum(c["count"] for c in copies), f"{name}: memcpy count")
        check(client["memcpy_bytes"] == sum(c["bytes"] for c in copies), f"{name}: memcpy bytes")
        check(client["memcpy_both_ids"] == client["memcpys"], f"{name}: memcpy records without two ids")
        check(client["deliveries"] > 1, f"{name}: expected many small buffers")
        if "--graphs" in args:
            check(client["graph_kernels"] == truth["categories"]["forward"]["count"], f"{name}: graph kernels")
        else:
            check(client["graph_kernels"] == 0, f"{name}: graph kernels without graphs")
    _checks.done()
