"""How `traintime run` makes its variables reach the ranks of each launcher
(annotate/python/traintime/_launchers.py): the command rewrites, checked one by one. The
launchers themselves run in test_run_launchers.py."""
from __future__ import annotations

import sys
from pathlib import Path

from testlib import SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "annotate" / "python"))
from traintime import _launchers as L  # noqa: E402

LIB = "/venv/traintime/_lib/libtraintime.so"
VARS = {"LD_PRELOAD": LIB, "TRAINTIME_OUTPUT": "/out"}


def test_launcher_kinds() -> None:
    cases = {
        ("mpirun", "-np", "2", "python", "t.py"): "mpi",
        ("/opt/mpi/bin/mpiexec", "-n", "2", "a.out"): "mpi",
        ("srun", "-n", "8", "python", "t.py"): "srun",
        ("deepspeed", "--hostfile", "h", "t.py"): "deepspeed",
        ("python3", "-u", "-m", "deepspeed.launcher.runner", "t.py"): "deepspeed",
        ("python3.11", "-m", "torch.distributed.run", "--nproc_per_node", "2", "t.py"): "other",
        ("torchrun", "--nproc_per_node", "2", "t.py"): "other",
        ("accelerate", "launch", "t.py"): "other",
        ("python", "t.py", "-m", "deepspeed.launcher.runner"): "other",
    }
    for command, kind in cases.items():
        assert L.launcher_kind(command) == kind, f"{command}: {L.launcher_kind(command)}, expected {kind}"


def test_ld_preload_is_added_never_replaced() -> None:
    assert L.join_path_list(None, LIB) == LIB
    assert L.join_path_list("/a.so", LIB) == f"/a.so:{LIB}"
    assert L.join_path_list("/a.so /b.so", LIB) == f"/a.so /b.so:{LIB}"
    assert L.join_path_list(f"{LIB}:/a.so", LIB) == f"{LIB}:/a.so"


def test_openmpi_gets_one_x_per_variable_after_the_program_name() -> None:
    cmd = L.openmpi_command(["mpirun", "-np", "2", "python", "t.py"], VARS, LIB)
    assert cmd == ["mpirun", "-x", "LD_PRELOAD", "-x", "TRAINTIME_OUTPUT", "-np", "2", "python", "t.py"]


def test_openmpi_keeps_the_users_own_x() -> None:
    cmd = L.openmpi_command(["mpirun", "-x", "LD_PRELOAD=/mine.so", "-x", "TRAINTIME_OUTPUT", "-x", "FOO=1",
                             "-np", "2", "a.out"], VARS, LIB)
    assert cmd == ["mpirun", "-x", "LD_PRELOAD=/mine.so:" + LIB, "-x", "TRAINTIME_OUTPUT", "-x", "FOO=1",
                   "-np", "2", "a.out"], cmd
    assert not any("OMPI_MCA_mca_base_env_list" in a for a in cmd)


def test_hydra_gets_genv_with_values() -> None:
    cmd = L.hydra_command(["mpiexec", "-n", "2", "a.out"], VARS, LIB)
    assert cmd == ["mpiexec", "-genv", "LD_PRELOAD", LIB, "-genv", "TRAINTIME_OUTPUT", "/out", "-n", "2", "a.out"]
    cmd = L.hydra_command(["mpiexec", "-genv", "LD_PRELOAD", "/mine.so", "-n", "2", "a.out"], VARS, LIB)
    assert cmd == ["mpiexec", "-genv", "TRAINTIME_OUTPUT", "/out", "-genv", "LD_PRELOAD", f"/mine.so:{LIB}",
                   "-n", "2", "a.out"], cmd


def test_srun_export_lists_get_our_names() -> None:
    env = {"PATH": "/bin"}
    assert L.srun_command(["srun", "-n", "2", "a.out"], VARS, env) == (["srun", "-n", "2", "a.out"], {})
    assert L.srun_command(["srun", "--export=ALL,FOO=1", "a.out"], VARS, env)[0][1] == "--export=ALL,FOO=1"
    assert L.srun_command(["srun", "--export=NONE", "a.out"], VARS, env)[0][1] == "--export=LD_PRELOAD,TRAINTIME_OUTPUT"
    assert L.srun_command(["srun", "--export", "PATH,FOO=1", "a.out"], VARS, env)[0][2] == \
        "PATH,FOO=1,LD_PRELOAD,TRAINTIME_OUTPUT"
    assert L.srun_command(["srun", "-n", "2", "--export=NONE", "a.out"], VARS, env)[0][3] == \
        "--export=LD_PRELOAD,TRAINTIME_OUTPUT"
    assert L.srun_command(["srun", "--ntasks", "2", "-p", "gpu", "--export", "NONE", "a.out"], VARS, env)[0][6] == \
        "LD_PRELOAD,TRAINTIME_OUTPUT"
    # The program's own --export is not srun's.
    assert L.srun_command(["srun", "-n", "2", "prog", "--export=NONE"], VARS, env)[0][4] == "--export=NONE"
    assert L.srun_command(["srun", "a.out"], VARS, {"SLURM_EXPORT_ENV": "NONE"})[1] == \
        {"SLURM_EXPORT_ENV": "LD_PRELOAD,TRAINTIME_OUTPUT"}


def test_deepspeed_env_file_keeps_the_users_lines(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    (home / ".deepspeed_env").write_text("NCCL_DEBUG=INFO\nLD_PRELOAD=/mine.so\n")
    (cwd / ".deepspeed_env").write_text("FOO=bar baz\n")
    lines = L.deepspeed_env_lines({}, cwd, home)
    assert lines == ["NCCL_DEBUG=INFO", "LD_PRELOAD=/mine.so", "FOO=bar baz"]
    text = L.deepspeed_env_file(lines, VARS, LIB)
    assert text == f"NCCL_DEBUG=INFO\nLD_PRELOAD=/mine.so:{LIB}\nFOO=bar baz\nTRAINTIME_OUTPUT=/out\n", text
    named = tmp_path / "my_env"
    named.write_text("A=1\n")
    assert L.deepspeed_env_lines({"DS_ENV_FILE": str(named)}, cwd, home) == ["A=1"]
