"""The wheel on an older distribution: Debian 11 (glibc 2.31, Python 3.9; a cached debootstrap
root, scripts/debian_root.py). In a mount namespace of its own (unshare -m) under a time limit, so
nothing stays mounted or running if it fails or is killed: a fresh virtual environment there,
pip install of the wheel (no network, no compiler), `traintime doctor`, a small annotated program
under `traintime run`, and `traintime report`."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from testlib import Checks, check, missing_dependency, wheel_dir, wheel_venv

LIMIT_S = 400

TRAIN_PY = """\
import traintime
for _ in range(4):
    with traintime.region("forward"):
        sum(range(30000))
    with traintime.region("backward"):
        sum(range(60000))
    traintime.step(samples=8, tokens=512)
"""

# Runs inside the namespace: the root's own /proc and /dev, then everything in the chroot.
INSIDE = r"""
set -eu
root="$1"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 /bin/sh -c '
  set -e
  echo "== glibc $(ldd --version | head -1 | grep -o "[0-9.]*$") python $(python3 -c "import platform; print(platform.python_version())")"
  python3 -m venv /venv
  /venv/bin/pip install --no-index --no-deps --disable-pip-version-check -q /wheel/*.whl
  cd /work
  echo "== traintime doctor"; /venv/bin/traintime doctor || echo "doctor exit $?"
  echo "== traintime run"; /venv/bin/traintime run --out /work/out -- /venv/bin/python train.py
  echo "== traintime report"; /venv/bin/traintime report /work/out
'
"""


def test_wheel_installs_and_runs_on_debian_11(build_dir: Path, tmp_path: Path) -> None:
    wheel_venv(build_dir)  # "Not Run" without the wheel
    tar = wheel_dir(build_dir) / "debian11-root.tar"
    if not tar.exists():
        missing_dependency(f"{tar} is missing: scripts/debian_root.py makes it (needs root, debootstrap and the "
                           "Debian registry)")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        missing_dependency("the Debian 11 root needs root and unshare (util-linux)")
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "-xf", str(tar)], check=True)
    (root / "wheel").mkdir()
    for whl in (wheel_dir(build_dir) / "dist").glob("traintime-*.whl"):
        shutil.copy(whl, root / "wheel")
    (root / "work").mkdir()
    (root / "work" / "train.py").write_text(TRAIN_PY)
    # Private mount and pid namespaces: the mounts vanish with them, and every process inside dies
    # with the namespace's first one, which timeout kills at the limit, whatever happens to the test.
    p = subprocess.run(["timeout", "--kill-after=10", str(LIMIT_S), "unshare", "-m", "--propagation", "private",
                        "--pid", "--fork", "sh", "-c", INSIDE, "inside", str(root)],
                       capture_output=True, text=True, timeout=LIMIT_S + 30)
    print(p.stdout, p.stderr[-4000:])
    c = Checks()
    c.check(p.returncode == 0, f"exit {p.returncode} in the Debian 11 root:\n{p.stderr[-3000:]}")
    m = re.search(r"== glibc ([0-9.]+) python ([0-9.]+)", p.stdout)
    c.check(m is not None and m.group(1) == "2.31" and m.group(2).startswith("3.9."),
            f"not Debian 11's glibc 2.31 and Python 3.9: {m and m.groups()}")
    c.check(re.search(r"^\[\s*ok\] preload: ", p.stdout, re.M), "doctor's preload probe did not pass on glibc 2.31")
    c.check("doctor exit" not in p.stdout, "doctor failed on Debian 11")
    c.check((root / "work" / "out" / "rank-00000.json").exists(), "traintime run wrote no rank file there")
    c.check("Run:" in p.stderr and "HTML report:" in p.stderr, "traintime run printed no summary there")
    c.check("DIAGNOSIS" in p.stdout.split("== traintime report", 1)[-1], "traintime report printed no report there")
    c.done()
    # Nothing stayed mounted: the namespace is gone.
    mounts = Path("/proc/self/mounts").read_text()
    check(str(root) not in mounts, "a mount of the Debian root is left behind")
