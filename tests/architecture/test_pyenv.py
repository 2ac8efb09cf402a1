"""scripts/pyenv.py: one environment per set of pins, shared through a link, never remade while
the pins hold; the whole dependency set is pinned."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testlib import SOURCE_DIR, load_module

pyenv = load_module(SOURCE_DIR / "scripts" / "pyenv.py", "pyenv")


def run(out: Path, cache: Path) -> subprocess.CompletedProcess:
    # /bin/false as the base interpreter: any attempt to make an environment fails loudly.
    return subprocess.run([sys.executable, str(SOURCE_DIR / "scripts" / "pyenv.py"), str(out), "--python", "/bin/false",
                           "--cache-dir", str(cache)], capture_output=True, text=True, timeout=60)


def test_pyenv_ready_environment_is_linked_not_remade(tmp_path: Path) -> None:
    constraints = pyenv.CONSTRAINTS.read_text()
    key = pyenv.env_key(pyenv.ALL_PINS, constraints)
    env = tmp_path / "cache" / f"pyenv-{key}"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    (env / pyenv.STAMP).write_text("\n".join(pyenv.ALL_PINS) + f"\nconstraints {key}\n")
    for out in (tmp_path / "build-a" / "pyenv", tmp_path / "build-b" / "pyenv"):
        p = run(out, tmp_path / "cache")
        assert p.returncode == 0 and p.stderr == "", p.stderr
        assert out.is_symlink() and out.resolve() == env.resolve()
    # Another set of pins is another environment: here it cannot be made, and says so.
    (env / pyenv.STAMP).write_text("torch==0.0\n")
    p = run(tmp_path / "build-a" / "pyenv", tmp_path / "cache")
    assert p.returncode == 0 and "pyenv: warning: no virtual environment" in p.stderr, p.stderr


def test_pyenv_key_follows_pins_and_constraints() -> None:
    base = pyenv.env_key(["a==1"], "b==2\n")
    assert base == pyenv.env_key(["a==1"], "b==2\n")
    assert base != pyenv.env_key(["a==2"], "b==2\n")
    assert base != pyenv.env_key(["a==1"], "b==3\n")


def test_pyenv_constraints_pin_every_top_level_package_at_its_pin() -> None:
    for chosen in pyenv.SETS.values():
        pinned = {}
        for line in chosen.constraints.read_text().splitlines():
            if line and not line.startswith("#"):
                name, _, version = line.partition("==")
                assert version, f"{line!r} in {chosen.constraints.name} is not pinned with =="
                pinned[name.lower().replace("_", "-")] = version
        pins = chosen.pins + chosen.source_pins
        for pin in pins:
            name, _, version = pin.partition("==")
            assert pinned.get(name.lower()) == version, f"{pin}: {chosen.constraints.name} says {pinned.get(name.lower())}"
        assert len(pinned) > len(pins), f"only the top-level packages are pinned in {chosen.constraints.name}"


def test_pyenv_hta_set_is_an_environment_of_its_own(tmp_path: Path) -> None:
    hta = pyenv.SETS["hta"]
    key = pyenv.env_key(hta.pins, hta.constraints.read_text())
    env = tmp_path / "cache" / f"htaenv-{key}"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    (env / pyenv.STAMP).write_text("\n".join(hta.pins) + f"\nconstraints {key}\n")
    out = tmp_path / "build" / "htaenv"
    p = subprocess.run([sys.executable, str(SOURCE_DIR / "scripts" / "pyenv.py"), str(out), "--set", "hta",
                        "--python", "/bin/false", "--cache-dir", str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert out.resolve() == env.resolve()
    # The tests' environment is not it: asked for, it is made (here it cannot be, and says so).
    p = run(tmp_path / "build" / "pyenv", tmp_path / "cache")
    assert "pyenv: warning: no virtual environment" in p.stderr and "PyTorch" in p.stderr, p.stderr
