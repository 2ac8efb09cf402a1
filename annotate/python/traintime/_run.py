"""`traintime run [options] -- COMMAND...`: COMMAND with traintime preloaded, then the summary.

The library is added to LD_PRELOAD (never replacing what is there) and the settings become
TRAINTIME_* variables; _launchers.py makes them reach every rank of launchers that do not pass
their environment on. COMMAND runs in a process group of its own (given the terminal when
traintime run has it, as a shell does), so SIGINT and SIGTERM sent to traintime run reach all of
it. When COMMAND ends, the report's summary of the job (traintime-report --format summary) and
where its HTML page is are printed on stderr, and traintime run ends as COMMAND did: its exit
status, or death by the same signal.

Exit status of traintime run itself: COMMAND's; 125 when traintime run could not start it (no
library in this install, an --out folder it cannot write); 126 COMMAND is not executable; 127
COMMAND not found; 2 bad usage.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from . import _launchers, _paths

CANNOT_START, NOT_EXECUTABLE, NOT_FOUND = 125, 126, 127
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1


def say(line: str) -> None:
    print(f"traintime: {line}", file=sys.stderr, flush=True)


def output_dir(out: Optional[str], env: Mapping[str, str]) -> Path:
    """--out, else TRAINTIME_OUTPUT, else traintime-out/ (the library's own default), absolute:
    every rank writes there whatever its working folder."""
    return Path(out or env.get("TRAINTIME_OUTPUT") or "traintime-out").expanduser().resolve()


def writable_problem(folder: Path) -> Optional[str]:
    """None when FOLDER exists (made if missing) and takes a file; else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".traintime-run-check-"):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def resolve(program: str, env: Mapping[str, str]) -> Tuple[Optional[str], int]:
    """The path COMMAND's program runs from, or (None, 127 / 126) as a shell would say."""
    if "/" in program:
        path = program
        if not os.path.exists(path):
            return None, NOT_FOUND
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            return None, NOT_FOUND
        path = found
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        return None, NOT_EXECUTABLE
    return path, 0


def preload_variables(lib: Path, out: Path, settings: Mapping[str, str],
                      env: Mapping[str, str]) -> Dict[str, str]:
    """The variables every rank needs: LD_PRELOAD with the library added, TRAINTIME_OUTPUT, the
    settings given as options, and the TRAINTIME_* settings already in the environment (remote
    ranks of mpirun or deepspeed do not inherit them)."""
    variables = {"LD_PRELOAD": _launchers.join_path_list(env.get("LD_PRELOAD"), str(lib))}
    for name, value in env.items():
        if name.startswith("TRAINTIME_") and name in _paths.config_names():
            variables[name] = value
    variables.update(settings)
    variables["TRAINTIME_OUTPUT"] = str(out)
    return variables


def launch_plan(command: Sequence[str], variables: Mapping[str, str], lib: str, env: Mapping[str, str],
                scratch: Path) -> Tuple[List[str], Dict[str, str], List[str]]:
    """COMMAND as it is run, the environment changes beyond the variables, and notes (one line
    each) on what was added for the launcher."""
    kind = _launchers.launcher_kind(command)
    if kind == "mpi":
        flavor = _launchers.mpi_flavor(command[0], env)
        if flavor == "openmpi":
            return _launchers.openmpi_command(command, variables, lib), {}, []
        if flavor == "hydra":
            return _launchers.hydra_command(command, variables, lib), {}, []
        return list(command), {}, [f"{command[0]} is neither Open MPI nor MPICH (--version): the variables reach the ranks "
                                   "only if it passes its environment on"]
    if kind == "srun":
        cmd, changes = _launchers.srun_command(command, variables, env)
        return cmd, changes, []
    if kind == "deepspeed":
        lines = _launchers.deepspeed_env_lines(env, Path.cwd(), Path.home())
        env_file = scratch / "deepspeed_env"
        env_file.write_text(_launchers.deepspeed_env_file(lines, variables, lib))
        return list(command), {"DS_ENV_FILE": str(env_file)}, []
    return list(command), {}, []


def _give_terminal_to_own_group() -> None:
    """Makes this process's group the terminal's foreground group (as a shell does for a job)."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # asking from the background is allowed then
    try:
        os.tcsetpgrp(0, os.getpgrp())
    except OSError:
        pass
    signal.signal(signal.SIGTTOU, old)


def _child_setup(take_terminal: bool) -> None:
    """In the child before exec: a process group of its own, the terminal when we had it, and
    SIGTERM when traintime run dies first (so a killed traintime run leaves no job behind)."""
    os.setpgid(0, 0)
    if take_terminal:
        _give_terminal_to_own_group()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    for sig in FORWARDED:
        signal.signal(sig, signal.SIG_DFL)


def _in_foreground() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def run_child(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Runs argv to its end; returns its exit status, or minus the signal that killed it."""
    take_terminal = _in_foreground()
    child_pid = [0]

    def forward(sig: int, _frame: object) -> None:
        if child_pid[0]:
            try:
                os.killpg(child_pid[0], sig)
            except OSError:
                pass

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        proc = subprocess.Popen(list(argv), env=dict(env), preexec_fn=lambda: _child_setup(take_terminal))
        child_pid[0] = proc.pid
        try:
            os.setpgid(proc.pid, proc.pid)
        except OSError:
            pass  # the child did it already (or has exec'ed)
        while True:
            try:
                status = proc.wait()
                break
            except InterruptedError:
                continue
    finally:
        if take_terminal:
            _give_terminal_to_own_group()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def new_rank_files(out: Path, since: float) -> List[Path]:
    """Rank files (final, snapshot or always-current record) of OUT written since SINCE."""
    found = []
    for pattern in ("rank-*.json", "rank-*.live"):
        for f in out.glob(pattern):
            try:
                if f.stat().st_mtime >= since:
                    found.append(f)
            except OSError:
                pass
    return found


def print_summary(out: Path, since: float) -> None:
    """The report's summary of the job just run, and its HTML page written beside the ranks."""
    report = _paths.report_program()
    if not new_rank_files(out, since):
        say(f"no rank file was written to {out} (nothing recorded, or the command ended before "
            "any process started recording); `traintime doctor` checks the set-up")
        return
    if report is None:
        say(f"rank files are in {out}; this install has no traintime-report to summarise them")
        return
    print("", file=sys.stderr, flush=True)
    subprocess.run([str(report), str(out), "--latest", "--format", "summary"], stdout=sys.stderr)
    html = out / "report.html"
    made = subprocess.run([str(report), str(out), "--latest", "--format", "html", "-o", str(html)],
                          capture_output=True, text=True)
    if made.returncode == 0:
        say(f"HTML report: {html} (all tables: traintime report {out})")
    else:
        say(f"the HTML report could not be written to {html}: "
            f"{(made.stderr.strip().splitlines() or ['no message'])[-1]}")


def end_like(status: int) -> int:
    """Exit status for COMMAND's status; for a signal, this process dies by the same one."""
    if status >= 0:
        return status
    sig = -status
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # COMMAND dumped core, not traintime run
    except (ValueError, OSError):
        pass
    signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    time.sleep(1)  # a signal whose default is not to end the process
    return 128 + sig


def run(command: Sequence[str], out_arg: Optional[str], settings: Mapping[str, str], summary: bool) -> int:
    lib = _paths.library()
    if lib is None:
        say("this install has no libtraintime.so (the pure-Python package of annotate/python): install the "
            "wheel built from the repository root, e.g. pip install <traintime checkout>")
        return CANNOT_START
    env = dict(os.environ)
    out = output_dir(out_arg, env)
    problem = writable_problem(out)
    if problem is not None:
        say(f"cannot write rank files to {out} ({problem}): give a writable folder with --out")
        return CANNOT_START
    program, code = resolve(command[0], env)
    if program is None:
        what = "command not found" if code == NOT_FOUND else "command is not executable"
        say(f"{what}: {command[0]}")
        return code
    variables = preload_variables(lib, out, settings, env)
    with tempfile.TemporaryDirectory(prefix="traintime-run-") as scratch:
        argv, changes, notes = launch_plan(command, variables, str(lib), env, Path(scratch))
        for note in notes:
            say(note)
        env.update(variables)
        env.update(changes)
        since = time.time() - 1.0  # file times may be coarser than the clock
        status = run_child(argv, env)
    if summary:
        print_summary(out, since)
    return end_like(status)
