"""`traintime run -- LAUNCHER ...` from the installed wheel: every rank writes its file, the summary
is printed, the exit status is the launcher's.

Run for real: `python -m torch.distributed.run` (Debian's PyTorch 1.13 through a virtual
environment with --system-site-packages; Debian's /usr/bin/torchrun starts /usr/bin/python3.11,
which does not see the environment's traintime), Open MPI's mpirun (locally, and through a
stand-in remote agent, `--mca plm_rsh_agent`, that starts each node's orted with a cleared
environment as ssh does, beside a `-x` of the user's own), and deepspeed's multi-node runner
(PyPI's DeepSpeed on the CPU: on one node, and on two pretend nodes, where stand-ins for pdsh and
ssh on PATH start each "node" on this machine with a cleared environment, so only what the runner
exports and its environment file reach the ranks).
Slurm is not installed here: a stand-in srun on PATH starts the tasks with the environment its
--export gives them, as srun does.
"""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from testlib import Checks, check, clean_env, load_json, pyenv_python, wheel_venv

# Writes what the rank saw: its rank and the variables traintime run is responsible for.
TRAIN_PY = """\
import json, os, sys, traintime
rank = next((os.environ[v] for v in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID") if v in os.environ), "0")
seen = {k: v for k, v in os.environ.items() if k in ("LD_PRELOAD", "USERVAR", "FROM_DS_ENV") or k.startswith("TRAINTIME_")}
with open(os.path.join(sys.argv[-1], "env-%s.json" % rank), "w") as f:  # deepspeed puts --local_rank first
    json.dump(seen, f)
if os.environ.get("DIST"):
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(4)
for _ in range(3):
    with traintime.region("forward"):
        sum(range(20000))
    if os.environ.get("DIST"):
        with traintime.region("allreduce", category="comm"):
            dist.all_reduce(t)
    traintime.step(samples=4, tokens=4)
if os.environ.get("DIST"):
    dist.destroy_process_group()
sys.exit(int(os.environ.get("EXIT_WITH", "0")))
"""

AGENT = """\
#!/bin/sh
# A stand-in for ssh as Open MPI's remote agent: the node's orted starts with a cleared environment
# (only Open MPI's permission to run as root, which a real node's root would not need to ask) and a
# /tmp of its own, as a real node has: pretend nodes sharing this machine's /tmp share Open MPI's
# session directory, where each daemon writes its hwloc topology into the same shared-memory file
# at once, and Open MPI 4.1's orted then dies by SIGSEGV in hwloc_shmem_topology_write now and then.
node_tmp="$(dirname "$0")/../node-tmp/$1"
mkdir -p "$node_tmp"
shift
exec env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR="$node_tmp" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /bin/sh -c "$*"
"""

PDSH = """\
#!/usr/bin/env python3
# A stand-in for pdsh -w HOSTS CMD...: CMD runs once per host on this machine, with a cleared
# environment as ssh gives it, %n replaced by the host's index (pdsh's node rank).
import os, subprocess, sys
args = sys.argv[1:]
hosts = []
while args and args[0].startswith("-"):
    opt = args.pop(0)
    if opt in ("-w", "-f"):
        value = args.pop(0)
        if opt == "-w":
            hosts = value.split(",")
cmd = " ".join(args)
env = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin"}
procs = [subprocess.Popen(["/bin/sh", "-c", cmd.replace("%n", str(n))], env=env) for n, _ in enumerate(hosts)]
sys.exit(max(p.wait() for p in procs))
"""

SSH = """\
#!/bin/sh
# A stand-in for ssh to this machine's pretend nodes: deepspeed's runner asks the first node for
# its address (hostname -I) and checks that it answers.
while [ "$#" -gt 0 ] && [ "${1#-}" != "$1" ]; do [ "$1" = "-o" ] || [ "$1" = "-p" ] && shift; shift; done
shift
case "$*" in
  "hostname -I") echo 127.0.0.1 ;;
  *) exec /bin/sh -c "$*" ;;
esac
"""

SRUN = """\
#!/usr/bin/env python3
# A stand-in for Slurm's srun -n N [--export=...] PROGRAM ARGS: N tasks on this machine, each with
# the environment --export (or SLURM_EXPORT_ENV) gives it: everything for ALL (the default), else
# only the named variables (NAME or NAME=VALUE) and SLURM_*; SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID.
import os, shutil, subprocess, sys
args, ntasks, export = sys.argv[1:], 1, os.environ.get("SLURM_EXPORT_ENV", "ALL")
while args and args[0].startswith("-"):
    opt = args.pop(0)
    if opt in ("-n", "--ntasks"):
        ntasks = int(args.pop(0))
    elif opt.startswith("--ntasks="):
        ntasks = int(opt.split("=", 1)[1])
    elif opt == "--export":
        export = args.pop(0)
    elif opt.startswith("--export="):
        export = opt.split("=", 1)[1]
entries = [e for e in export.split(",") if e]
if any(e.upper() == "ALL" for e in entries):
    base = dict(os.environ)
else:
    base = {k: v for k, v in os.environ.items() if k.startswith("SLURM_")}
for e in entries:
    if e.upper() in ("ALL", "NONE", "NIL"):
        continue
    name, eq, value = e.partition("=")
    if eq:
        base[name] = value
    elif name in os.environ:
        base[name] = os.environ[name]
program = shutil.which(args[0]) or args[0]
procs = []
for task in range(ntasks):
    env = dict(base, SLURM_PROCID=str(task), SLURM_NTASKS=str(ntasks), SLURM_JOB_ID="4242", SLURM_LOCALID=str(task))
    procs.append(subprocess.Popen([program] + args[1:], env=env))
sys.exit(max(p.wait() for p in procs))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stand_ins(tmp_path: Path) -> Path:
    folder = tmp_path / "stand-ins"
    folder.mkdir()
    for name, text in (("agent", AGENT), ("pdsh", PDSH), ("ssh", SSH), ("srun", SRUN)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def run_under_traintime(build_dir: Path, tmp_path: Path, command: list, env_extra: dict | None = None,
                        torch: bool = False, expect_rc: int = 0) -> tuple[Path, subprocess.CompletedProcess]:
    venv = wheel_venv(build_dir, torch=torch)
    out, seen = tmp_path / "out", tmp_path / "seen"
    seen.mkdir(exist_ok=True)
    (tmp_path / "train.py").write_text(TRAIN_PY)
    env = clean_env({"PATH": f"{tmp_path / 'stand-ins'}:{venv / 'bin'}:{os.environ.get('PATH', '')}",
                     "SEEN": str(seen), **(env_extra or {})})
    command = [str(c).replace("SEEN", str(seen)) for c in command]
    p = subprocess.run([str(venv / "bin" / "traintime"), "run", "--out", str(out), "--"] + command,
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=280)
    print(p.stdout[-3000:], p.stderr[-5000:])
    check(p.returncode == expect_rc, f"traintime run exit {p.returncode}, expected {expect_rc}:\n{p.stderr[-3000:]}")
    return out, p


def check_ranks(c: Checks, out: Path, seen: Path, world: int, lib_in: str, stderr: str) -> None:
    files = sorted(x.name for x in out.glob("rank-*.json"))
    c.check(files == [f"rank-{r:05d}.json" for r in range(world)], f"rank files {files} (one per rank, none more)")
    for r in range(world):
        env_file = seen / f"env-{r}.json"
        if not c.check(env_file.exists(), f"rank {r} wrote no environment"):
            continue
        got = load_json(env_file)
        c.check(got.get("LD_PRELOAD", "").endswith(lib_in), f"rank {r}: LD_PRELOAD {got.get('LD_PRELOAD')!r}")
        c.check(got.get("TRAINTIME_OUTPUT") == str(out), f"rank {r}: TRAINTIME_OUTPUT {got.get('TRAINTIME_OUTPUT')!r}")
        if (out / f"rank-{r:05d}.json").exists():
            doc = load_json(out / f"rank-{r:05d}.json")
            c.check((doc["rank"], doc["world_size"]) == (r, world), f"rank file {r}: {doc['rank']} of {doc['world_size']}")
    c.check("Run:" in stderr and "HTML report:" in stderr, "no summary printed")


def test_torchrun_two_ranks(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir, torch=True)
    # --redirects 1 --tee 1 (each worker's stdout to a log file and to the console): PyTorch 1.13's
    # default "0" is read as no value at all on Python 3.11 (enum.IntFlag no longer iterates over
    # its 0 member), and its agent then fails before starting any worker.
    out, p = run_under_traintime(build_dir, tmp_path, [venv / "bin" / "python", "-m", "torch.distributed.run",
                                                       "--standalone", "--nproc_per_node", "2", "--redirects", "1",
                                                       "--tee", "1", "train.py", "SEEN"],
                                 {"DIST": "1"}, torch=True)
    c = Checks()
    check_ranks(c, out, tmp_path / "seen", 2, "libtraintime.so", p.stderr)
    c.done()


def test_mpirun_np2(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir)
    out, p = run_under_traintime(build_dir, tmp_path, ["mpirun", "--oversubscribe", "-np", "2", venv / "bin" / "python",
                                                       "train.py", "SEEN"])
    c = Checks()
    check_ranks(c, out, tmp_path / "seen", 2, "libtraintime.so", p.stderr)
    c.done()


def test_mpirun_keeps_a_failing_exit_status(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir)
    _, p = run_under_traintime(build_dir, tmp_path, ["mpirun", "--oversubscribe", "-np", "2", "-x", "EXIT_WITH=3",
                                                     venv / "bin" / "python", "train.py", "SEEN"], expect_rc=3)
    check("Run:" in p.stderr, "no summary after a failing job")


def test_openmpi_remote_agent_clears_the_environment(build_dir: Path, tmp_path: Path) -> None:
    """Two pretend nodes whose orted starts with a cleared environment: only what mpirun passes
    with -x reaches the ranks, the user's own -x USERVAR included."""
    venv = wheel_venv(build_dir)
    agent = stand_ins(tmp_path) / "agent"
    out, p = run_under_traintime(build_dir, tmp_path, ["mpirun", "--mca", "plm_rsh_agent", agent, "-H", "nodeA:1,nodeB:1",
                                                       "-np", "2", "-x", "USERVAR=mine", venv / "bin" / "python",
                                                       "train.py", "SEEN"])
    c = Checks()
    check_ranks(c, out, tmp_path / "seen", 2, "libtraintime.so", p.stderr)
    for r in range(2):
        got = load_json(tmp_path / "seen" / f"env-{r}.json") if (tmp_path / "seen" / f"env-{r}.json").exists() else {}
        c.check(got.get("USERVAR") == "mine", f"rank {r}: the user's -x USERVAR did not arrive: {got}")
    c.done()


def test_deepspeed_one_node(build_dir: Path, tmp_path: Path) -> None:
    """deepspeed on one node (PyPI's DeepSpeed, CPU): its launcher passes its environment to the 2
    workers it starts; one rank file each, none from the launcher."""
    python = pyenv_python(build_dir)
    site = next(wheel_venv(build_dir).glob("lib/python3*/site-packages"))
    out, p = run_under_traintime(build_dir, tmp_path, [python, "-m", "deepspeed.launcher.runner", "--num_gpus", "2",
                                                       "--master_port", str(free_port()), "train.py", "SEEN"],
                                 {"DIST": "1", "PYTHONPATH": str(site)})
    c = Checks()
    check_ranks(c, out, tmp_path / "seen", 2, "libtraintime.so", p.stderr)
    c.done()


def test_deepspeed_multinode_through_its_env_file(build_dir: Path, tmp_path: Path) -> None:
    """deepspeed --hostfile with two pretend nodes (pdsh and ssh stand-ins: cleared environments):
    its runner passes on only NCCL*, PYTHON*, MV2*, UCX*, MLFLOW* variables and its environment
    file's lines; traintime run adds its own lines and keeps the user's."""
    python = pyenv_python(build_dir)
    venv = wheel_venv(build_dir)
    stand_ins(tmp_path)
    (tmp_path / "hostfile").write_text("nodeA slots=1\nnodeB slots=1\n")
    (tmp_path / ".deepspeed_env").write_text("FROM_DS_ENV=kept\n")
    site = next(venv.glob("lib/python3*/site-packages"))
    out, p = run_under_traintime(build_dir, tmp_path, [python, "-m", "deepspeed.launcher.runner", "--hostfile", "hostfile",
                                                       "--master_port", str(free_port()), "train.py", "SEEN"],
                                 {"DIST": "1", "PYTHONPATH": str(site)})
    c = Checks()
    check_ranks(c, out, tmp_path / "seen", 2, "libtraintime.so", p.stderr)
    for r in range(2):
        f = tmp_path / "seen" / f"env-{r}.json"
        got = load_json(f) if f.exists() else {}
        c.check(got.get("FROM_DS_ENV") == "kept", f"rank {r}: the user's .deepspeed_env line was lost: {got}")
    c.check((tmp_path / ".deepspeed_env").read_text() == "FROM_DS_ENV=kept\n", "the user's .deepspeed_env was changed")
    c.done()


def test_srun_stand_in_with_and_without_export(build_dir: Path, tmp_path: Path) -> None:
    venv = wheel_venv(build_dir)
    stand_ins(tmp_path)
    c = Checks()
    for export in ("--export=ALL", "--export=NONE", "--export=USERVAR"):
        case = tmp_path / export.split("=")[1]
        case.mkdir()
        (case / "stand-ins").symlink_to(tmp_path / "stand-ins")
        out, p = run_under_traintime(build_dir, case, ["srun", "-n", "2", export, venv / "bin" / "python",
                                                       case / "train.py", "SEEN"],
                                     {"USERVAR": "mine", "PYTHONPATH": str(next(venv.glob("lib/python3*/site-packages")))})
        check_ranks(c, out, case / "seen", 2, "libtraintime.so", p.stderr)
    c.done()
