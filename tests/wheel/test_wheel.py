"""The built wheel (tests/wheel/test_wheel_build.py) and the `traintime` command it installs:
what is in it, that it loads on glibc 2.28 and exports only its own symbols, `traintime doctor`,
and `traintime run` around a Python program (exit status, signals, a command not found, an
unwritable --out, LD_PRELOAD kept, settings as options)."""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import zipfile
from pathlib import Path

from testlib import SOURCE_DIR, SYSTEM_PYTHON, Checks, check, clean_env, load_json, wheel_dir, wheel_venv

TRAIN_PY = """\
import sys, time, traintime
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4
for _ in range(steps):
    with traintime.region("forward"):
        sum(range(30000))
    with traintime.region("backward"):
        sum(range(60000))
    traintime.step(samples=8, tokens=8 * 64)
if len(sys.argv) > 2:
    mode = sys.argv[2]
    if mode == "sleep":
        print("sleeping", flush=True)
        time.sleep(60)
    elif mode.startswith("exit"):
        sys.exit(int(mode[4:]))
    elif mode == "kill":
        import os, signal
        os.kill(os.getpid(), signal.SIGTERM)
"""
# glibc of RHEL 8, the oldest distribution the wheel is for (manylinux_2_28).
GLIBC_MAX = (2, 28)
# What the wheel's binaries may need at run time: glibc's own libraries and nothing else (the C++
# runtime is linked in; CUDA, CUPTI and NCCL are loaded lazily from the user's installation).
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2"}


def cmake_version() -> str:
    m = re.search(r"^project\(traintime\s+VERSION\s+([0-9.]+)", (SOURCE_DIR / "CMakeLists.txt").read_text(), re.M)
    assert m
    return m.group(1)


def the_wheel(build_dir: Path) -> Path:
    wheel_venv(build_dir)  # "Not Run" without the fixture's wheel
    wheels = sorted((wheel_dir(build_dir) / "dist").glob("traintime-*.whl"))
    check(len(wheels) == 1, f"one wheel expected, found {wheels}")
    return wheels[0]


def site_package(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages/traintime"))
    check(len(found) == 1, f"traintime is not installed in {venv}")
    return found[0]


def binaries(build_dir: Path) -> list[Path]:
    pkg = site_package(wheel_venv(build_dir))
    return [pkg / "_lib" / "libtraintime.so", pkg / "_bin" / "traintime-report"]


def run(cmd: list, env: dict | None = None, timeout: int = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env(), **kw)


def test_wheel_is_one_py3_manylinux_2_28_wheel_of_the_cmake_version(build_dir: Path) -> None:
    wheel = the_wheel(build_dir)
    c = Checks()
    c.check(wheel.name == f"traintime-{cmake_version()}-py3-none-manylinux_2_28_x86_64.whl",
            f"wheel name {wheel.name}: expected the CMake version, py3-none and manylinux_2_28")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for member in ("traintime/__init__.py", "traintime/torch.py", "traintime/_cli.py", "traintime/_lib/libtraintime.so",
                       "traintime/_bin/traintime-report", "traintime/_config_table.json"):
            c.check(member in names, f"{member} is not in the wheel")
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(meta).decode()
        c.check(f"\nVersion: {cmake_version()}\n" in metadata, "METADATA's version is not CMake's project(VERSION)")
        c.check("Requires-Python: >=3.8" in metadata, "the wheel does not declare Python >= 3.8")
        entry = z.read(meta.replace("METADATA", "entry_points.txt")).decode()
        c.check("traintime = traintime._cli:main" in entry, f"no traintime command: {entry}")
        c.check(not any(n.endswith((".pyd", ".abi3.so")) or re.search(r"cpython-\d+", n) for n in names),
                "the wheel holds a Python extension")
    venv = wheel_venv(build_dir)
    p = run([venv / "bin" / "traintime", "--version"])
    c.check(p.returncode == 0 and p.stdout.strip() == f"traintime {cmake_version()}", f"--version: {p.stdout}{p.stderr}")
    c.done()


def test_the_wheel_and_the_pure_python_package_replace_each_other(build_dir: Path, tmp_path: Path) -> None:
    """One distribution, `traintime`, at CMake's project(VERSION) from either source: pip install of
    annotate/python over the wheel removes the binaries (`traintime run` then says to install the
    wheel, in one line), and the wheel installed again brings them back (--force-reinstall: pip keeps
    an installed distribution of the same version)."""
    wheel = the_wheel(build_dir)
    venv = tmp_path / "venv"
    # Debian's setuptools and wheel build annotate/python with no network (--system-site-packages).
    check(run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", venv]).returncode == 0, "python3 -m venv failed")
    pip = [venv / "bin" / "python", "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check"]
    # Installed from a copy: setuptools writes build/ next to the sources.
    src = tmp_path / "src"
    shutil.copytree(SOURCE_DIR / "annotate" / "python", src,
                    ignore=shutil.ignore_patterns("build", "__pycache__", "*.egg-info"))
    lib = next(venv.glob("lib/python3*/site-packages")) / "traintime" / "_lib" / "libtraintime.so"
    installed = ("import importlib.metadata as m; "
                 "print(*sorted(d.version for d in m.distributions() if d.metadata['Name'] == 'traintime'))")

    def install(*what: object) -> None:
        p = run([*pip, *what], timeout=300)
        check(p.returncode == 0, f"pip install {what}: {p.stderr[-2000:]}")
        p = run([venv / "bin" / "python", "-c", installed])
        check(p.stdout.split() == [cmake_version()], f"after pip install {what}: traintime {p.stdout.split()} "
              f"installed, expected one distribution of CMake's version {cmake_version()}")

    install(wheel)
    check(lib.is_file(), f"the wheel installed no {lib}")
    install("--no-build-isolation", src)
    check(not lib.exists(), "annotate/python installed over the wheel left the wheel's libtraintime.so")
    p = run([venv / "bin" / "traintime", "run", "--out", tmp_path / "out", "--", "true"])
    check(p.returncode == 125 and len(p.stderr.strip().splitlines()) == 1 and "install the wheel" in p.stderr,
          f"traintime run of the pure-Python install: exit {p.returncode}, {p.stderr!r}")
    install("--force-reinstall", wheel)
    check(lib.is_file(), "the wheel installed over annotate/python did not bring libtraintime.so back")


def test_auditwheel_says_manylinux_2_28_or_older(build_dir: Path) -> None:
    wheel = the_wheel(build_dir)
    auditwheel = wheel_dir(build_dir) / "wheel-tools" / "bin" / "auditwheel"
    check(auditwheel.exists(), f"{auditwheel} is missing (scripts/pyenv.py --set wheel-tools)")
    p = run([auditwheel, "show", wheel])
    print(p.stdout, p.stderr)
    check(p.returncode == 0, f"auditwheel show failed: {p.stderr}")
    tags = [int(minor) for minor in re.findall(r"manylinux_2_(\d+)_x86_64", p.stdout)]
    check(tags and min(tags) <= 28, f"auditwheel names no manylinux_2_28 or older platform:\n{p.stdout}")


def symbol_versions(path: Path) -> dict[str, list[tuple[int, ...]]]:
    """Versions the file needs, by library family (GLIBC, GLIBCXX, CXXABI, GCC), from readelf -V."""
    p = run(["readelf", "-V", "-W", path])
    check(p.returncode == 0, f"readelf -V {path}: {p.stderr}")
    out: dict[str, list[tuple[int, ...]]] = {}
    for family, version in re.findall(r"Name: (GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)", p.stdout):
        out.setdefault(family, []).append(tuple(int(x) for x in version.split(".")))
    return out


def test_every_binary_needs_glibc_2_28_at_most_and_no_cxx_runtime(build_dir: Path) -> None:
    c = Checks()
    for binary in binaries(build_dir):
        versions = symbol_versions(binary)
        c.check(versions.get("GLIBC"), f"{binary.name}: no GLIBC version read (readelf output changed?)")
        highest = max(versions.get("GLIBC", [(0,)]))
        c.check(highest <= GLIBC_MAX, f"{binary.name} needs GLIBC_{'.'.join(map(str, highest))} (> 2.28)")
        for family in ("GLIBCXX", "CXXABI", "GCC"):
            c.check(family not in versions, f"{binary.name} needs {family}_{versions.get(family)}: a C++ runtime of "
                    "the machine (the wheel links its own)")
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", binary]).stdout))
        c.check(needed <= ALLOWED_NEEDED, f"{binary.name} needs {sorted(needed - ALLOWED_NEEDED)}")
    c.done()


def test_a_newer_glibc_symbol_would_be_seen(tmp_path: Path) -> None:
    """The check above reads what readelf says: Debian 12's own libstdc++ needs GLIBC_2.34 or newer."""
    libstdcxx = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    check(max(symbol_versions(libstdcxx)["GLIBC"]) > GLIBC_MAX, "the GLIBC version check cannot see a newer glibc")


def test_config_table_is_the_librarys(build_dir: Path) -> None:
    shipped = load_json(site_package(wheel_venv(build_dir)) / "_config_table.json")
    generator = build_dir / "bin" / "traintime-config-table"
    check(generator.exists(), f"{generator} is not built")
    check(shipped == json.loads(run([generator]).stdout), "the wheel's _config_table.json differs from the library's table")
    names = [row["name"] for row in shipped]
    check("TRAINTIME_OUTPUT" in names and "TRAINTIME_LOG_LEVEL" in names, f"table: {names}")
    helptext = run([wheel_venv(build_dir) / "bin" / "traintime", "run", "--help"]).stdout
    for row in shipped:
        if row["name"] != "TRAINTIME_OUTPUT":
            option = "--" + row["name"][len("TRAINTIME_"):].lower().replace("_", "-")
            check(option in helptext, f"traintime run has no {option} for {row['name']}")


def test_doctor_on_a_machine_without_gpu(build_dir: Path, tmp_path: Path) -> None:
    traintime = wheel_venv(build_dir) / "bin" / "traintime"
    started = time.monotonic()
    p = run([traintime, "doctor", "--out", tmp_path / "out"], cwd=tmp_path)
    took = time.monotonic() - started
    print(p.stdout, p.stderr)
    c = Checks()
    c.check(p.returncode == 0, f"doctor exit {p.returncode} on a machine that can profile CPU regions")
    for name in ("GPU", "CUPTI", "other tools", "NCCL", "preload", "output", "clock"):
        c.check(re.search(rf"^\[\s*\w+\] {name}: ", p.stdout, re.M), f"no line for the {name} check")
    c.check(re.search(r"^\[\s*ok\] preload: ", p.stdout, re.M), "the preload probe did not pass")
    c.check(re.search(r"^\[info\] GPU: ", p.stdout, re.M), "no GPU should be one informational line")
    c.check(took < 30, f"doctor took {took:.1f} s")
    js = run([traintime, "doctor", "--json", "--out", tmp_path / "out"], cwd=tmp_path)
    doc = json.loads(js.stdout)
    c.check(doc["ok"] is True and {ch["check"] for ch in doc["checks"]} >= {"GPU", "preload", "output", "clock"},
            f"--json: {js.stdout}")
    c.check(not (tmp_path / "out").exists(), "doctor made the output folder it only checks")
    c.done()


def test_doctor_on_a_simulated_gpu(build_dir: Path, tmp_path: Path) -> None:
    """simgpu's libnvidia-ml, libcuda and libcupti (SIMULATED): the GPU line names the device, and
    the CUPTI line is the library's own verdict from the probe, which starts CUDA."""
    sim = build_dir / "sim"
    check((sim / "libcuda.so.1").exists() and (sim / "libnvidia-ml.so.1").exists(), f"simgpu is not built in {sim}")
    env = clean_env({"LD_LIBRARY_PATH": str(sim), "TRAINTIME_CUPTI_LIB": str(sim / "libcupti.so.13")})
    p = run([wheel_venv(build_dir) / "bin" / "traintime", "doctor", "--out", tmp_path / "out"], env=env, cwd=tmp_path)
    print(p.stdout, p.stderr)
    c = Checks()
    c.check(p.returncode == 0, f"doctor exit {p.returncode} on simgpu")
    c.check(re.search(r"^\[\s*ok\] GPU: 1 GPU\(s\) \(simgpu \(SIMULATED GPU\)\), driver simgpu", p.stdout, re.M),
            "the GPU line does not name simgpu's device and driver")
    c.check(re.search(rf"^\[\s*ok\] CUPTI: .*{re.escape(str(sim / 'libcupti.so.13'))}", p.stdout, re.M),
            "the CUPTI line does not name the libcupti the library loaded")
    c.done()


def test_doctor_fails_for_an_output_folder_it_cannot_make_and_for_bad_usage(build_dir: Path, tmp_path: Path) -> None:
    traintime = wheel_venv(build_dir) / "bin" / "traintime"
    (tmp_path / "file").write_text("not a folder")
    p = run([traintime, "doctor", "--out", tmp_path / "file" / "out"])
    check(p.returncode == 1, f"doctor exit {p.returncode} for an output folder below a file")
    check(re.search(r"^\[fail\] output: .* -- choose a writable folder", p.stdout, re.M), p.stdout)
    check(run([traintime, "doctor", "--bogus"]).returncode == 2, "bad usage is not exit status 2")


def write_train(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text(TRAIN_PY)
    return script


def test_run_python_prints_the_summary_and_the_html_page(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir)
    out = tmp_path / "out"
    p = run([venv / "bin" / "traintime", "run", "--out", out, "--", venv / "bin" / "python", write_train(tmp_path)],
            cwd=tmp_path)
    print(p.stdout, p.stderr)
    c = Checks()
    c.check(p.returncode == 0, f"exit {p.returncode}")
    c.check((out / "rank-00000.json").exists(), "no rank file")
    doc = load_json(out / "rank-00000.json")
    c.check({r["path"] for r in doc["regions"]} >= {"forward", "backward"}, f"regions {doc['regions']}")
    for line in ("DIAGNOSIS", "Run:", "Stragglers:", "Where the step time goes"):
        c.check(line in p.stderr, f"the summary lacks {line!r}")
    c.check(f"HTML report: {out / 'report.html'}" in p.stderr and (out / "report.html").is_file(), "no HTML page")
    c.check("ranks and records" not in p.stderr.lower(), "the summary printed more than its sections")
    c.done()


def test_run_keeps_the_exit_status_of_a_failing_command(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir)
    out = tmp_path / "out"
    p = run([venv / "bin" / "traintime", "run", "--out", out, "--", venv / "bin" / "python", write_train(tmp_path),
             "3", "exit7"])
    check(p.returncode == 7, f"exit {p.returncode}, expected the command's 7")
    check("Run:" in p.stderr and (out / "rank-00000.json").exists(), f"no summary or rank file:\n{p.stderr}")


def test_run_dies_by_the_signal_that_killed_the_command(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir)
    p = run([venv / "bin" / "traintime", "run", "--out", tmp_path / "out", "--", venv / "bin" / "python",
             write_train(tmp_path), "3", "kill"])
    check(p.returncode == -signal.SIGTERM, f"exit {p.returncode}, expected death by SIGTERM")
    check("Run:" in p.stderr, f"no summary:\n{p.stderr}")


def test_sigterm_to_traintime_run_reaches_the_command_and_the_summary_follows(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir)
    out = tmp_path / "out"
    proc = subprocess.Popen([str(venv / "bin" / "traintime"), "run", "--out", str(out), "--", str(venv / "bin" / "python"),
                             str(write_train(tmp_path)), "3", "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=clean_env())
    assert proc.stdout is not None
    check(proc.stdout.readline().strip() == "sleeping", "the command did not start")
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    check(proc.returncode == -signal.SIGTERM, f"exit {proc.returncode}, expected death by SIGTERM:\n{stderr}")
    doc = load_json(out / "rank-00000.json")
    check(doc["exit_reason"].startswith("signal"), f"rank file exit_reason {doc['exit_reason']!r}")
    check("Run:" in stderr, f"no summary after SIGTERM:\n{stderr}")


def test_run_command_not_found_is_one_line_and_127(build_dir: Path, tmp_path: Path) -> None:
    p = run([wheel_venv(build_dir) / "bin" / "traintime", "run", "--out", tmp_path / "out", "--", "no-such-program-x"])
    check(p.returncode == 127, f"exit {p.returncode}")
    check(p.stderr.strip() == "traintime: command not found: no-such-program-x", f"stderr: {p.stderr!r}")


def test_run_stops_before_the_command_when_out_cannot_be_written(build_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    marker = tmp_path / "started"
    p = run([wheel_venv(build_dir) / "bin" / "traintime", "run", "--out", tmp_path / "file" / "out", "--",
             "touch", marker])
    check(p.returncode == 125, f"exit {p.returncode}")
    check(not marker.exists(), "the command ran although --out cannot be written")
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and "cannot write rank files to" in lines[0] and "--out" in lines[0], f"stderr: {p.stderr!r}")


def test_run_adds_to_ld_preload_and_passes_settings(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir)
    lib = site_package(venv) / "_lib" / "libtraintime.so"
    show = tmp_path / "show.py"
    show.write_text("import os, json; print(json.dumps({k: v for k, v in os.environ.items() "
                    "if k == 'LD_PRELOAD' or k.startswith('TRAINTIME_')}))\n")
    env = clean_env({"LD_PRELOAD": "libm.so.6"})
    p = run([venv / "bin" / "traintime", "run", "--out", tmp_path / "out", "--warmup-steps", "0", "--log-level",
             "error", "--no-summary", "--", venv / "bin" / "python", show], env=env)
    check(p.returncode == 0, p.stderr)
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    c = Checks()
    c.check(seen.get("LD_PRELOAD") == f"libm.so.6:{lib}", f"LD_PRELOAD {seen.get('LD_PRELOAD')!r}")
    c.check(seen.get("TRAINTIME_WARMUP_STEPS") == "0" and seen.get("TRAINTIME_LOG_LEVEL") == "error", f"{seen}")
    c.check(seen.get("TRAINTIME_OUTPUT") == str(tmp_path / "out"), f"{seen}")
    c.done()


def test_report_verb_is_traintime_report(build_dir: Path, tmp_path: Path) -> None:
    traintime = wheel_venv(build_dir) / "bin" / "traintime"
    golden = SOURCE_DIR / "tests" / "report" / "data" / "golden"
    via_verb = run([traintime, "report", golden, "--format", "json"])
    direct = run([build_dir / "bin" / "traintime-report", golden, "--format", "json"])
    check(via_verb.returncode == 0 and json.loads(via_verb.stdout)["ranks"] == json.loads(direct.stdout)["ranks"],
          f"traintime report: {via_verb.returncode} {via_verb.stderr}")
    check(run([traintime, "report", tmp_path / "none"]).returncode == 2, "traintime report keeps the exit status")


def test_a_source_checkout_on_pythonpath_still_finds_the_wheels_binaries(build_dir: Path, tmp_path: Path) -> None:
    """annotate/python on PYTHONPATH (a developer's checkout) shadows the installed package, which
    has no binaries of its own there: the command finds them in the installed wheel."""
    env = clean_env({"PYTHONPATH": str(SOURCE_DIR / "annotate" / "python")})
    p = run([wheel_venv(build_dir) / "bin" / "traintime", "doctor", "--out", tmp_path / "out"], env=env)
    check(p.returncode == 0 and re.search(r"^\[\s*ok\] preload: ", p.stdout, re.M), f"doctor:\n{p.stdout}{p.stderr}")


def test_a_checkout_pip_installed_from_still_finds_the_wheels_binaries(build_dir: Path, tmp_path: Path) -> None:
    """A pip install from annotate/python leaves traintime.egg-info beside the sources; with that
    folder on PYTHONPATH it is the first `traintime` distribution found, and has no binaries: the
    command still finds the installed wheel's library, report and config table (the README test met
    this: its recipes' options were unknown after the Python section's pip install)."""
    src = tmp_path / "python"
    shutil.copytree(SOURCE_DIR / "annotate" / "python", src, ignore=shutil.ignore_patterns("build", "__pycache__"))
    (src / "traintime.egg-info").mkdir(exist_ok=True)
    (src / "traintime.egg-info" / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: traintime\nVersion: {cmake_version()}\n")
    env = clean_env({"PYTHONPATH": str(src)})
    traintime = wheel_venv(build_dir) / "bin" / "traintime"
    helptext = run([traintime, "run", "--help"], env=env).stdout
    check("--print-every" in helptext, f"traintime run has no options from the config table:\n{helptext}")
    p = run([traintime, "run", "--out", tmp_path / "out", "--no-summary", "--", "true"], env=env)
    check(p.returncode == 0, f"traintime run found no library: exit {p.returncode}, {p.stderr!r}")
