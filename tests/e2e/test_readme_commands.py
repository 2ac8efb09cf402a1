"""Every command in README.md's bash blocks, run exactly as written (pytest; CTest label e2e).

The commands run block by block in a scratch folder laid out as the README assumes: `build/` is
this build, `scripts/` the checkout's scripts (the quickstart's `scripts/build.sh` rebuilds this
build, TRAINTIME_BUILD_DIR naming it, which is up to date: it only checks), `traintime/` the
source checkout (the C++ recipe's include path), `annotate/` a copy of the Python package, `train.py` and `train.cpp` a user's small annotated programs, and
`traintime-out/`, `old/`, `new/` hold a job's rank files for the report commands. A command that
needs what this machine lacks (a GPU, Slurm, DeepSpeed) ends in `# needs: WHAT`: it is printed as
skipped, never run. The environment is what a user has (HOME, PYTHONPATH as after `pip install`, on
PATH the virtual environment the README makes and activates, then PyTorch from PyPI; the machine's
caches), plus, as the README says, Open MPI's permission to run as root and to run more ranks than
cores.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from testlib import SOURCE_DIR, check, clean_env, pyenv_python

README = SOURCE_DIR / "README.md"
GOLDEN = SOURCE_DIR / "tests" / "report" / "data" / "golden"

TRAIN_PY = """\
import traintime
for _ in range(5):
    with traintime.region("step"):
        with traintime.region("forward"):
            sum(range(20000))
        with traintime.region("backward"):
            sum(range(40000))
    traintime.step(samples=8, tokens=8 * 128)
"""

TRAIN_CPP = """\
#include <traintime/traintime.h>
int main() {
  volatile double x = 0;
  for (int step = 0; step < 5; ++step) {
    { TT_SCOPE("forward");  for (int i = 0; i < 100000; ++i) x += i; }
    { TT_SCOPE("backward"); for (int i = 0; i < 200000; ++i) x += i; }
    tt_step(8, 8 * 128);
  }
  return 0;
}
"""


def bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block: continuation lines joined, comment lines dropped."""
    blocks = []
    for body in re.findall(r"^```(?:bash|sh)\n(.*?)^```", text, re.M | re.S):
        cmds, cur = [], ""
        for line in body.splitlines():
            if not cur and (not line.strip() or line.lstrip().startswith("#")):
                continue
            cur += line[:-1] + " " if line.endswith("\\") else line
            if not line.endswith("\\"):
                cmds.append(cur)
                cur = ""
        blocks.append(cmds)
    return blocks


def needs(cmd: str) -> str | None:
    m = re.search(r"#\s*needs:\s*(.+)$", cmd)
    return m.group(1).strip() if m else None


def test_every_readme_command_runs_as_written(build_dir: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "build").symlink_to(build_dir)
    (work / "scripts").symlink_to(SOURCE_DIR / "scripts")
    (work / "traintime").symlink_to(SOURCE_DIR)
    shutil.copytree(SOURCE_DIR / "annotate", work / "annotate",
                    ignore=shutil.ignore_patterns("build", "__pycache__", "*.egg-info"))
    (work / "train.py").write_text(TRAIN_PY)
    (work / "train.cpp").write_text(TRAIN_CPP)
    for job in ("traintime-out", "old", "new"):
        shutil.copytree(GOLDEN, work / job)
    # PyTorch as most users have it, from PyPI (the project's virtual environment, scripts/pyenv.py),
    # first on PATH: Debian 12's own torchrun fails on its Python 3.11 before starting any worker.
    # Without the environment the test is "Not Run" here and a failure under TRAINTIME_CI.
    pyenv_bin = pyenv_python(build_dir).parent
    assert (pyenv_bin / "torchrun").exists(), f"{pyenv_bin}/torchrun is missing (scripts/pyenv.py builds it)"
    # XDG_CACHE_HOME: the machine's caches (pip's downloads, zig's libc++ in ~/.cache/traintime) for
    # the recipe's `pip install ./traintime`, which rebuilds in the checkout's build-wheel/ only what
    # changed since tests/wheel built the wheel (the CTest fixture "wheel").
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    env = clean_env({"HOME": str(tmp_path / "home"), "PYTHONPATH": str(work / "annotate" / "python"),
                     "OMPI_MCA_rmaps_base_oversubscribe": "1", "TRAINTIME_BUILD_DIR": str(build_dir),
                     "XDG_CACHE_HOME": str(cache)})
    # The Running section's virtual environment, as activated there, is on PATH for the blocks after
    # it too: the recipes start with its `traintime run`.
    user_venv_bin = tmp_path / "home" / ".venvs" / "traintime" / "bin"
    env["PATH"] = os.pathsep.join([str(user_venv_bin), str(pyenv_bin), env.get("PATH", "")])
    (tmp_path / "home").mkdir()

    blocks = bash_blocks(README.read_text())
    check(len(blocks) >= 6, f"only {len(blocks)} bash blocks found in README.md")
    ran, skipped, said = [], [], ""
    for cmds in blocks:
        runnable = []
        for cmd in cmds:
            why = needs(cmd)
            if why:
                skipped.append(f"SKIPPED (needs {why}): {cmd}")
            else:
                runnable.append(cmd)
        if not runnable:
            continue
        # One shell per block: a block's variables (LIB=...) hold for its later commands.
        script = "set -e\n" + "\n".join(f"echo '+ {c.replace(chr(39), '')}'\n{c}" for c in runnable)
        p = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        print(p.stdout)
        print(p.stderr)
        said += p.stderr
        check(p.returncode == 0, f"a README command failed (exit {p.returncode}); the block:\n" + "\n".join(runnable)
              + f"\nstderr:\n{p.stderr[-3000:]}")
        # Run as written means without complaints: no launcher warning about an unset variable,
        # no option the launcher rejects, no misspelled TRAINTIME_ variable.
        for bad in ("not found in the environment", "unrecognized arguments", "is not a traintime variable",
                    "externally-managed-environment"):
            check(bad not in p.stderr, f"a README command printed {bad!r}:\n{p.stderr[-2000:]}")
        ran += runnable
    print("\n".join(skipped))
    for s in skipped:
        check("GPU" in s or "Slurm" in s or "node_exporter" in s, f"skipped for a reason this machine could meet: {s}")
    # The recipes really ran: the launchers' ranks wrote their files, the C++ program was built.
    check((work / "traintime-out" / "rank-00007.json").exists(), "8 ranks under a launcher wrote no rank-00007.json")
    check((work / "train").exists(), "the C++ recipe built nothing")
    check((tmp_path / "home" / ".venvs" / "traintime").is_dir(), "the venv recipe made no venv")
    check(any("torchrun" in c for c in ran) and any("mpirun" in c for c in ran), "the launcher recipes did not run")
    check(any(c.startswith("scripts/build.sh") for c in ran), "the quickstart's build line did not run")
    check(any(c.startswith("traintime run") for c in ran) and said.count("traintime: HTML report:") >= 3,
          "the traintime run recipes printed no summaries")
