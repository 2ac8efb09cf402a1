"""torch.profiler's real Kineto (the PyPI torch wheel's libtorch_cpu.so, scripts/pyenv.py) under
the preload keeps its GPU trace. No GPU: libtorch binds to a stand-in libcupti.so.13
(standin_cupti.cpp, preloaded) that logs every CUPTI call and, like CUPTI up to 13.2, allows one
subscriber. Kineto subscribes first thing in libkineto_init; refused, it stays CPU-only for the
life of the process (no buffers, no kinds). traintime holds that one subscription, so it must
answer Kineto's cuptiSubscribe itself: Kineto then registers its buffers and enables its kinds."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from testlib import SOURCE_DIR, Checks, clean_env, load_json, pyenv_python

HERE = Path(__file__).resolve().parent
CPU_ONLY = "CUPTI initialization failed"  # Kineto's warning when its subscription is refused
REFUSED = 39  # CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED


def run_probe(build_dir: Path, tmp_path: Path, traintime: bool, subscribe: int = 0,
              log_level: str = "1") -> tuple[list[str], str]:
    python = pyenv_python(build_dir)
    standin = build_dir / "standin-cupti" / "libcupti.so.13"
    assert standin.is_file(), f"{standin} is missing: build the tt_standin_cupti target"
    log = tmp_path / "cupti-calls.txt"
    lib = build_dir / "lib" / "libtraintime.so"
    env = clean_env({
        "LD_PRELOAD": f"{lib}:{standin}" if traintime else str(standin),
        "TT_STANDIN_CUPTI_LOG": str(log),
        "TT_STANDIN_CUPTI_SUBSCRIBE": str(subscribe),
        "TRAINTIME_OUTPUT": str(tmp_path / "out"),
        # 1: Kineto's warnings and errors; 0 adds its INFO lines (what it collected at its stop).
        "KINETO_LOG_LEVEL": log_level,
        "PYTHONPATH": str(SOURCE_DIR / "annotate" / "python"),
    })
    cmd = [str(python), str(HERE / "kineto_probe.py")] + (["--traintime", str(lib)] if traintime else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=200)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    json.loads(p.stdout.splitlines()[-1])
    return (log.read_text().splitlines() if log.exists() else []), p.stderr


def after_kineto_subscribed(calls: list[str]) -> list[str]:
    """The calls after Kineto's cuptiSubscribe (its userdata is nullptr; traintime's is not)."""
    at = next((i for i, c in enumerate(calls) if c.startswith("cuptiSubscribe userdata=(nil)")), None)
    assert at is not None, f"Kineto never called cuptiSubscribe: {calls}"
    return calls[at + 1:]


def test_kineto_refused_its_subscription_stays_cpu_only(build_dir: Path, tmp_path: Path) -> None:
    # The premise, on the real binary: a refused cuptiSubscribe costs Kineto its whole GPU trace.
    calls, stderr = run_probe(build_dir, tmp_path, traintime=False, subscribe=REFUSED)
    later = after_kineto_subscribed(calls)
    assert CPU_ONLY in stderr, f"no CPU-only warning from Kineto:\n{stderr}"
    assert not [c for c in later if c.startswith(("cuptiActivityRegisterCallbacks", "cuptiActivityEnable "))], later


def test_kineto_under_the_preload_registers_buffers_and_enables_kinds(build_dir: Path, tmp_path: Path) -> None:
    calls, stderr = run_probe(build_dir, tmp_path, traintime=True, log_level="0")
    c = Checks()
    # Kineto disables its kinds, then collects GPU buffers only if it still holds one CUPTI
    # requested (CuptiActivityApi::activityBuffers): traintime must keep one open for it, as
    # CUPTI would, or its trace has no GPU activity at all (seen on an H200: 0 kernels).
    c.check(re.search(r"Processed \d+ GPU records", stderr) is not None,
            "Kineto collected no GPU buffer at its stop (it held none when it stopped)")
    c.check(any(x.startswith("cuptiSubscribe userdata=0x") and x.endswith("-> 0") for x in calls),
            f"traintime did not hold the subscription first: {calls[:5]}")
    later = after_kineto_subscribed(calls)
    c.check(any(x == f"cuptiSubscribe userdata=(nil) -> {REFUSED}" for x in calls),
            "the stand-in did not refuse Kineto's subscription (CUPTI's one-subscriber rule)")
    c.check(CPU_ONLY not in stderr, f"Kineto went CPU-only under the preload:\n{stderr}")
    # Kineto's kinds that traintime does not use reach CUPTI; its buffer registration is kept by
    # traintime, which names it in the rank file.
    enabled = [x for x in later if x.startswith("cuptiActivityEnable ")]
    c.check(enabled, f"Kineto enabled no activity kind: {later}")
    c.check(not [x for x in later if x.startswith("cuptiActivityRegisterTimestampCallback")],
            "Kineto's timestamp callback reached CUPTI while traintime captured")
    rank = load_json(tmp_path / "out" / "rank-00000.json")
    reason = rank.get("gpu_capture_reason", "")
    c.check("1 registration(s)" in reason and "subscription(s) served from traintime's" in reason,
            f"gpu_capture_reason does not show Kineto's registration and subscription: {reason!r}")
    # Kineto's TSC clock (on by default): kept from CUPTI, applied to the records it is handed.
    c.check("timestamp callback applied to the records forwarded to it" in reason,
            f"gpu_capture_reason does not show Kineto's clock was taken: {reason!r}")
    c.done()
