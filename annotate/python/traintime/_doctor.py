"""`traintime doctor`: can this machine be profiled, and what to do where it cannot.

One line per check, each with what to do when it fails: the GPU and driver (NVML), the CUPTI a
process would load and whether traintime supports it, another tool holding CUPTI or the profiling
counters, NCCL (shared, static or none, its version and profiler plugin API), the preload working
(a probe process under it writes a rank file), the output folder, the clock. Exit status 0 when
what is present can be profiled (no GPU is information: CPU regions and NCCL still work), 1 when
something would stop profiling, 2 bad usage. `--json` prints the checks as one JSON object.

The CUPTI verdict is the library's own: the probe initialises CUDA when a GPU is present, so the
library loads CUPTI as in a training process, and its rank file (read by traintime-report, the
one rank-file reader) names the libcupti and whether it captures.
"""

from __future__ import annotations

import ctypes
import glob
import json
import mmap
import os
import re
import struct
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import _paths, _run

OK, INFO, WARN, FAIL = "ok", "info", "warn", "fail"
PROBE_TIMEOUT_S = 60


class Check:
    def __init__(self, name: str, status: str, detail: str, fix: str = "") -> None:
        self.name, self.status, self.detail, self.fix = name, status, detail, fix

    def line(self) -> str:
        text = f"[{self.status:>4}] {self.name}: {self.detail}"
        return text + (f" -- {self.fix}" if self.fix and self.status in (WARN, FAIL) else "")

    def as_json(self) -> Dict[str, str]:
        return {"check": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


# --- GPU and driver (NVML) ---------------------------------------------------------------------

def _nvml() -> Optional[ctypes.CDLL]:
    try:
        return ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None


def check_gpu() -> Check:
    nvml = _nvml()
    if nvml is None:
        return Check("GPU", INFO, "no NVIDIA driver (libnvidia-ml.so.1 not found): no GPU capture here; CPU "
                     "regions, steps and NCCL calls are still recorded")
    if nvml.nvmlInit_v2() != 0:
        return Check("GPU", FAIL, "the NVIDIA driver is installed but NVML does not start (nvmlInit failed)",
                     "check the driver with nvidia-smi; a driver/library version mismatch needs a reboot or "
                     "matching packages")
    try:
        version = ctypes.create_string_buffer(96)
        nvml.nvmlSystemGetDriverVersion(version, 96)
        count = ctypes.c_uint(0)
        nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
        names = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            name = ctypes.create_string_buffer(96)
            if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) == 0 and \
                    nvml.nvmlDeviceGetName(handle, name, 96) == 0:
                names.append(name.value.decode(errors="replace"))
    finally:
        nvml.nvmlShutdown()
    if count.value == 0:
        return Check("GPU", INFO, f"driver {version.value.decode()} but no GPU visible (CUDA_VISIBLE_DEVICES, "
                     "a container without devices?): CPU regions and NCCL calls are still recorded")
    shown = ", ".join(sorted(set(names)))
    return Check("GPU", OK, f"{count.value} GPU(s) ({shown}), driver {version.value.decode()}")


# --- other tools ---------------------------------------------------------------------------------

PROFILER_PROCESSES = {"nv-hostengine": "DCGM (nv-hostengine)", "dcgm-exporter": "DCGM exporter",
                      "nsys": "Nsight Systems", "ncu": "Nsight Compute"}


def running_tools() -> List[str]:
    found = []
    for comm in glob.glob("/proc/[0-9]*/comm"):
        try:
            name = Path(comm).read_text().strip()
        except OSError:
            continue
        if name in PROFILER_PROCESSES:
            found.append(f"{PROFILER_PROCESSES[name]} (pid {comm.split('/')[2]})")
    return sorted(set(found))


def check_other_tools(lib: Optional[Path]) -> Check:
    notes = []
    for var in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"):
        value = os.environ.get(var)
        if value and (lib is None or Path(value).resolve() != lib.resolve()):
            notes.append(f"{var}={value} (another tool injects into CUDA: traintime subscribes to CUPTI lazily "
                         "and, before CUDA 13.3, only one CUPTI subscriber per process works)")
    tools = running_tools()
    if tools:
        notes.append("running: " + ", ".join(tools) + " (DCGM profiling and Nsight Compute hold the GPU's "
                     "performance counters: traintime's tracing still works; Nsight Systems' CUDA trace takes "
                     "CUPTI in the processes it runs)")
    if not notes:
        return Check("other tools", OK, "no other CUDA injection in this environment and no Nsight or DCGM "
                     "process running")
    return Check("other tools", WARN, "; ".join(notes),
                 "run the job without the other tool's CUDA trace (nsys -t nvtx,osrt, or without nsys) so "
                 "traintime owns CUPTI; DCGM: dcgmi profile --pause only matters for counter tools")


# --- NCCL ----------------------------------------------------------------------------------------

def _needed(path: Path) -> List[str]:
    """DT_NEEDED entries of a 64-bit little-endian ELF file (empty when it is not one)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return []
            e_phoff, = struct.unpack_from("<Q", head, 32)
            e_phentsize, e_phnum = struct.unpack_from("<HH", head, 54)
            f.seek(e_phoff)
            phdrs = f.read(e_phentsize * e_phnum)
            loads, dynamic = [], None
            for i in range(e_phnum):
                p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", phdrs, i * e_phentsize)
                if p_type == 1:
                    loads.append((p_vaddr, p_offset, p_filesz))
                elif p_type == 2:
                    dynamic = (p_offset, p_filesz)
            if dynamic is None:
                return []
            f.seek(dynamic[0])
            entries = f.read(dynamic[1])
            strtab, needed = None, []
            for i in range(0, len(entries) - 15, 16):
                tag, val = struct.unpack_from("<qQ", entries, i)
                if tag == 0:
                    break
                if tag == 5:
                    strtab = val
                elif tag == 1:
                    needed.append(val)
            if strtab is None:
                return []
            base = next((off + strtab - va for va, off, size in loads if va <= strtab < va + size), None)
            if base is None:
                return []
            names = []
            for n in needed:
                f.seek(base + n)
                names.append(f.read(256).split(b"\0", 1)[0].decode(errors="replace"))
            return names
    except (OSError, struct.error):
        return []


def _site_dirs() -> List[Path]:
    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    return [Path(d) for d in dirs if Path(d).is_dir()]


def _loaded_path(name: str) -> Optional[str]:
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            if name in line and "/" in line:
                return line[line.index("/"):]
    except OSError:
        pass
    return None


def _plugin_versions(path: str) -> List[int]:
    """The profiler plugin API versions (ncclProfiler_vN) this libnccl can load."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return sorted({int(v) for v in re.findall(rb"ncclProfiler_v(\d+)", m)})
    except (OSError, ValueError):
        return []


def check_nccl() -> Check:
    candidates: List[str] = ["libnccl.so.2"]
    for site in _site_dirs():
        candidates += sorted(glob.glob(str(site / "nvidia" / "*" / "lib" / "libnccl.so.2")))
    for candidate in candidates:
        try:
            nccl = ctypes.CDLL(candidate)
        except OSError:
            continue
        version = ctypes.c_int(0)
        nccl.ncclGetVersion(ctypes.byref(version))
        v = version.value
        text = f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"
        path = _loaded_path("libnccl.so") or candidate
        plugins = _plugin_versions(path)
        plugin_text = (f"profiler plugin API v{', v'.join(map(str, plugins))}" if plugins
                       else "no profiler plugin API")
        other = os.environ.get("NCCL_PROFILER_PLUGIN")
        detail = f"shared NCCL {text} at {path} ({plugin_text}); traintime interposes its calls"
        if other:
            return Check("NCCL", WARN, detail + f"; NCCL_PROFILER_PLUGIN={other} loads another tool's plugin",
                         "traintime interposes NCCL's API and needs no plugin; unset NCCL_PROFILER_PLUGIN if that "
                         "tool is not wanted")
        return Check("NCCL", OK, detail)
    for site in _site_dirs():
        torch_cuda = site / "torch" / "lib" / "libtorch_cuda.so"
        if torch_cuda.is_file() and not any(n.startswith("libnccl") for n in _needed(torch_cuda)):
            return Check("NCCL", OK, f"static: NCCL is linked into {torch_cuda}; traintime finds its calls in "
                         "the library that made them, and its kernels by name")
    return Check("NCCL", INFO, "none found (no libnccl.so.2 on the loader's path or in this Python "
                 "environment): single-GPU and gloo jobs need none; NCCL jobs are profiled once it is there")


# --- the preload probe and CUPTI ---------------------------------------------------------------

# CUDA starts before the first region, as in a training process that moves its model to the GPU
# first: the library's exit work is then registered after CUDA's and runs before CUDA's teardown.
PROBE = r"""
import ctypes, sys
import traintime
if sys.argv[1] == "1":
    try:
        print("cuInit", ctypes.CDLL("libcuda.so.1").cuInit(0), flush=True)
    except OSError as e:
        print("no libcuda.so.1:", e, flush=True)
with traintime.region("doctor_probe"):
    pass
traintime.step(samples=1, tokens=0)
"""


def probe(lib: Path, report: Optional[Path], gpu: bool) -> Dict[str, Any]:
    """Runs a small Python process under the preload; returns what its rank file says (via
    traintime-report --format json) or the problem."""
    with tempfile.TemporaryDirectory(prefix="traintime-doctor-") as out:
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "WORLD_SIZE", "TRAINTIME_OUTPUT", "TRAINTIME_DISABLE")}
        env["LD_PRELOAD"] = str(lib)
        env["TRAINTIME_OUTPUT"] = out
        env["TRAINTIME_LOG_LEVEL"] = "error"
        env["PYTHONPATH"] = os.pathsep.join([str(_paths.PACKAGE_DIR.parent)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        try:
            p = subprocess.run([sys.executable, "-c", PROBE, "1" if gpu else "0"], env=env, capture_output=True,
                               text=True, timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"problem": f"the probe process did not end within {PROBE_TIMEOUT_S} s"}
        files = sorted(Path(out).glob("rank-*.json"))
        if p.returncode != 0 or not files:
            last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
            return {"problem": f"the probe process under LD_PRELOAD wrote no rank file ({last})"}
        if report is None:
            return {"rank_file": str(files[0])}
        r = subprocess.run([str(report), out, "--format", "json"], capture_output=True, text=True)
        try:
            ranks = json.loads(r.stdout)["per_rank"]
        except (ValueError, KeyError):
            return {"problem": f"traintime-report could not read the probe's rank file ({r.stderr.strip()})"}
        row = ranks[0] if ranks else {}
        return {"rank_file": str(files[0]), "gpu_capture": row.get("gpu_capture", ""),
                "gpu_capture_reason": row.get("gpu_capture_reason", "")}


def check_preload(lib: Optional[Path], result: Dict[str, Any]) -> Check:
    if lib is None:
        return Check("preload", FAIL, "this install has no libtraintime.so (the pure-Python package)",
                     "install the wheel built from a traintime checkout: pip install <checkout>")
    if "problem" in result:
        return Check("preload", FAIL, f"{lib}: {result['problem']}",
                     "run `LD_PRELOAD=" + str(lib) + " python -c pass` to see the loader's message; an "
                     "older glibc than 2.28 cannot load it")
    return Check("preload", OK, f"{lib} loads and a probe process under it wrote a rank file")


def check_cupti(gpu: Check, result: Dict[str, Any]) -> Check:
    if gpu.status != OK:
        return Check("CUPTI", INFO, "not checked without a GPU: the library loads CUPTI when a process "
                     "initialises CUDA")
    capture, reason = result.get("gpu_capture"), result.get("gpu_capture_reason", "")
    if capture == "cupti":
        return Check("CUPTI", OK, reason)
    if capture is None:
        return Check("CUPTI", INFO, "not checked: the probe did not run")
    if capture == "unavailable":
        return Check("CUPTI", FAIL, reason or "GPU capture unavailable",
                     "point TRAINTIME_CUPTI_LIB at a libcupti.so of CUDA 12.1 or newer (PyTorch's "
                     "nvidia-cuda-cupti wheel has one), or stop the tool that holds CUPTI")
    return Check("CUPTI", FAIL, f"CUDA started in the probe but the library did not capture ({reason})",
                 "check that CUDA_INJECTION64_PATH is not set by another tool and that TRAINTIME_CUPTI is not 0")


# --- output folder and clock ---------------------------------------------------------------------

def check_output(out: Path) -> Check:
    """Whether OUT takes files; a missing OUT is not made (the library makes it), its nearest
    existing parent must let it."""
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == out:
        problem = _run.writable_problem(out)
    elif not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        problem = f"{existing} does not let {out} be made"
    else:
        problem = None
    if problem is not None:
        return Check("output", FAIL, f"{out} cannot be written ({problem})",
                     "choose a writable folder: TRAINTIME_OUTPUT=DIR, or traintime run --out DIR")
    return Check("output", OK, f"{out} is writable")


def check_clock() -> Check:
    try:
        flags = next((line.split(":", 1)[1].split() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("flags")), [])
    except OSError:
        flags = []
    try:
        source = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    except OSError:
        source = "unknown"
    if os.uname().machine != "x86_64":
        return Check("clock", OK, f"{os.uname().machine}: the architected timer (constant rate)")
    invariant = "constant_tsc" in flags and "nonstop_tsc" in flags
    if invariant and source == "tsc":
        return Check("clock", OK, "invariant TSC, and the kernel keeps time with it: annotations cost a few ns")
    why = "the TSC is not invariant" if not invariant else f"the kernel's clock source is {source}, not tsc"
    return Check("clock", WARN, f"{why}: traintime times regions with clock_gettime (correct, slower per "
                 "annotation)", "nothing to do for correctness; on VMs ask for an invariant TSC "
                 "(e.g. KVM's invtsc) for the fastest annotations")


# --- all of it -----------------------------------------------------------------------------------

def doctor(out_arg: Optional[str], as_json: bool) -> int:
    lib = _paths.library()
    report = _paths.report_program()
    gpu = check_gpu()
    result = probe(lib, report, gpu.status == OK) if lib is not None else {}
    checks = [gpu, check_cupti(gpu, result), check_other_tools(lib), check_nccl(), check_preload(lib, result),
              check_output(_run.output_dir(out_arg, os.environ)), check_clock()]
    failed = any(c.status == FAIL for c in checks)
    if as_json:
        print(json.dumps({"ok": not failed, "checks": [c.as_json() for c in checks]}, indent=1))
    else:
        for c in checks:
            print(c.line())
        print("traintime doctor: " + ("something above would stop profiling" if failed else
                                       "this machine can be profiled (traintime run -- COMMAND)"))
    return 1 if failed else 0
