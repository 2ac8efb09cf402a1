"""How `traintime run` makes its variables reach every rank of each launcher.

Most launchers hand their own environment to the processes they start (python, torchrun and
``python -m torch.distributed.run``, ``accelerate launch``, ``deepspeed`` on one node, Slurm's
``srun`` by default, MPICH's Hydra). The others need the variables named on their command line or
in a file, and this module rewrites the command for them, never dropping what the user gave:

- Open MPI's ``mpirun``/``mpiexec``: one ``-x NAME`` per variable after the program name (a
  user's own ``-x LD_PRELOAD=...`` gets the library added to its value). Never through
  ``OMPI_MCA_mca_base_env_list``: Open MPI 4.1 refuses to start when that parameter meets a
  user's own ``-x``.
- MPICH (Hydra) ``mpiexec``/``mpirun``: one ``-genv NAME VALUE`` per variable (added to what
  Hydra passes anyway, so ``-envnone`` still gets them).
- ``srun --export=...``: the variables are added to the user's list (``NONE`` becomes the list of
  ours: Slurm then passes only those and ``SLURM_*``, as ``NONE`` would have).
- ``deepspeed`` with several nodes passes on only the variables whose names start with ``NCCL``,
  ``PYTHON``, ``MV2``, ``UCX`` or ``MLFLOW``, plus the lines of its environment file
  (``.deepspeed_env`` in the home and the working folder, or the file ``DS_ENV_FILE`` names):
  ``DS_ENV_FILE`` points at a file of the user's lines followed by ours.

Pure functions of the command and the environment, so tests check each rewrite directly.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

PYTHON_RE = re.compile(r"^python(\d+(\.\d+)?)?$")
MPI_NAMES = ("mpirun", "mpiexec", "orterun", "mpiexec.hydra")
DEEPSPEED_MODULES = ("deepspeed.launcher.runner",)
#: deepspeed's runner reads its environment file from these folders (launcher/runner.py).
DEEPSPEED_ENV_DEFAULT = ".deepspeed_env"


def join_path_list(current: Optional[str], add: str) -> str:
    """``current`` (a colon- or space-separated list such as LD_PRELOAD) with ``add`` at the end,
    unless it is there already."""
    parts = [p for p in re.split(r"[: ]", current or "") if p]
    if add in parts:
        return current or add
    return f"{current}:{add}" if current else add


def launcher_kind(command: Sequence[str]) -> str:
    """Which launcher COMMAND starts: "mpi", "srun", "deepspeed", or "other" (python, torchrun,
    accelerate and everything else pass their environment on)."""
    name = os.path.basename(command[0])
    if name in MPI_NAMES:
        return "mpi"
    if name == "srun":
        return "srun"
    if name == "deepspeed" or name == "ds":
        return "deepspeed"
    if PYTHON_RE.match(name):  # python's own options, up to the script or -m MODULE
        i = 1
        while i < len(command) - 1 and command[i].startswith("-"):
            if command[i] == "-m":
                return "deepspeed" if command[i + 1] in DEEPSPEED_MODULES else "other"
            i += 2 if command[i] in ("-W", "-X") else 1
    return "other"


def mpi_flavor(program: str, env: Mapping[str, str]) -> str:
    """"openmpi", "hydra" (MPICH, Intel MPI, MVAPICH2) or "unknown", from ``PROGRAM --version``."""
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=20,
                             env=dict(env), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = out.stdout + out.stderr
    if "Open MPI" in text or "OpenRTE" in text or "Open RTE" in text:
        return "openmpi"
    if "HYDRA" in text or "MPICH" in text or "Intel(R) MPI" in text:
        return "hydra"
    return "unknown"


def _merge_value(name: str, value: str, lib: str) -> str:
    """A value the user gives on the command line or in a file for one of our variables: kept,
    with the library added when it is LD_PRELOAD."""
    return join_path_list(value, lib) if name == "LD_PRELOAD" else value


def openmpi_command(command: Sequence[str], variables: Mapping[str, str], lib: str) -> List[str]:
    """Open MPI: ``-x NAME`` for each variable the command does not export itself; a user's
    ``-x LD_PRELOAD=VALUE`` gets the library appended to VALUE. Options go right after the
    program name, where mpirun reads its own options."""
    out = list(command)
    named = set()
    for i in range(1, len(out) - 1):
        if out[i] in ("-x", "--x"):
            name, eq, value = out[i + 1].partition("=")
            named.add(name)
            if eq and name in variables:
                out[i + 1] = f"{name}={_merge_value(name, value, lib)}"
    extra: List[str] = []
    for name in variables:
        if name not in named:
            extra += ["-x", name]
    return out[:1] + extra + out[1:]


def hydra_command(command: Sequence[str], variables: Mapping[str, str], lib: str) -> List[str]:
    """MPICH's Hydra: ``-genv NAME VALUE`` for each variable (a user's ``-genv LD_PRELOAD V``
    gets the library appended to V)."""
    out = list(command)
    named = set()
    for i in range(1, len(out) - 2):
        if out[i] in ("-genv", "-env") and out[i + 1] in variables:
            named.add(out[i + 1])
            out[i + 2] = _merge_value(out[i + 1], out[i + 2], lib)
    extra: List[str] = []
    for name, value in variables.items():
        if name not in named:
            extra += ["-genv", name, value]
    return out[:1] + extra + out[1:]


def _export_list(value: str, names: Sequence[str]) -> str:
    """An srun --export value that also passes NAMES."""
    entries = [e for e in value.split(",") if e]
    if any(e.upper() == "ALL" for e in entries):
        return value  # the whole environment goes, ours included
    entries = [e for e in entries if e.upper() not in ("NONE", "NIL")]
    given = {e.split("=", 1)[0] for e in entries}
    return ",".join(entries + [n for n in names if n not in given])


#: srun's options whose value may be the next argument (`-n 8`, `--ntasks 8`): srun's own options
#: end at the first other argument that is no such value, the program.
SRUN_SHORT_WITH_VALUE = set("ABcdDeGiJLmMnNopqrStTwWx")
SRUN_LONG_WITH_VALUE = {
    "--account", "--chdir", "--constraint", "--cpu-bind", "--cpus-per-task", "--dependency", "--distribution",
    "--error", "--exclude", "--export", "--gpus", "--gpus-per-node", "--gpus-per-task", "--gres", "--input",
    "--job-name", "--jobid", "--mem", "--mem-per-cpu", "--mem-per-gpu", "--mpi", "--nodelist", "--nodes",
    "--ntasks", "--ntasks-per-node", "--output", "--partition", "--qos", "--reservation", "--signal", "--time",
}


def srun_command(command: Sequence[str], variables: Mapping[str, str],
                 env: Mapping[str, str]) -> Tuple[List[str], Dict[str, str]]:
    """srun: the command with its --export list extended, and the environment changes (the
    same for SLURM_EXPORT_ENV, which srun reads when --export is not given)."""
    out = list(command)
    names = list(variables)
    env_changes: Dict[str, str] = {}
    takes_value = False
    for i in range(1, len(out)):
        arg = out[i]
        if takes_value:
            takes_value = False
            continue
        if not arg.startswith("-"):
            break  # the program: srun's options end here
        takes_value = (len(arg) == 2 and arg[1] in SRUN_SHORT_WITH_VALUE) or arg in SRUN_LONG_WITH_VALUE
        if arg.startswith("--export="):
            out[i] = "--export=" + _export_list(arg[len("--export="):], names)
            return out, env_changes
        if arg == "--export" and i + 1 < len(out):
            out[i + 1] = _export_list(out[i + 1], names)
            return out, env_changes
    if env.get("SLURM_EXPORT_ENV"):
        env_changes["SLURM_EXPORT_ENV"] = _export_list(env["SLURM_EXPORT_ENV"], names)
    return out, env_changes


def deepspeed_env_lines(env: Mapping[str, str], cwd: Path, home: Path) -> List[str]:
    """The lines deepspeed's runner would read from its environment file(s): ~/NAME, then
    ./NAME, where NAME is DS_ENV_FILE or .deepspeed_env (an absolute DS_ENV_FILE is one file)."""
    name = env.get("DS_ENV_FILE") or DEEPSPEED_ENV_DEFAULT
    files: List[Path] = []
    for folder in (home, cwd):
        f = folder / name
        if f not in files and f.is_file():
            files.append(f)
    lines: List[str] = []
    for f in files:
        lines += [line.rstrip("\n") for line in f.read_text().splitlines() if "=" in line]
    return lines


def deepspeed_env_file(user_lines: Sequence[str], variables: Mapping[str, str], lib: str) -> str:
    """The environment file `traintime run` hands deepspeed: the user's lines, ours after them
    (a user's LD_PRELOAD line gets the library appended instead)."""
    out: List[str] = []
    done = set()
    for line in user_lines:
        name, _, value = line.partition("=")
        key = name.strip()
        if key in variables:
            out.append(f"{key}={_merge_value(key, value.strip(), lib)}")
            done.add(key)
        else:
            out.append(line)
    out += [f"{name}={value}" for name, value in variables.items() if name not in done]
    return "\n".join(out) + "\n"
