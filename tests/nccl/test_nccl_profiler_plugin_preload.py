"""libtraintime.so as NCCL's profiler plugin (nccl/src/profiler_plugin.h), on simgpu's NCCL, which
loads and calls plugins as NCCL does (test_nccl_profiler_plugin_sim.py checks that):
 - with no plugin of the user's, NCCL finds traintime's through STATIC_PLUGIN with no user step;
 - with one (NCCL_PROFILER_PLUGIN, NCCL's configuration files, libnccl-profiler.so on the loader
   path, the net plugin's profiler), traintime chains to it: the user's plugin sees exactly what
   it sees without traintime (its own mask, its events, NCCL's hierarchy in its own handles);
 - NCCL_PROFILER_PLUGIN=none is respected; TRAINTIME_NCCL=0 leaves NCCL's lookup alone;
 - a chained plugin whose init fails costs it its events, never traintime's or the program's.
The user's plugin is recording_profiler_plugin.cpp; sim_nccl_ops runs as rank 0 of 2.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from testlib import Checks, clean_env, load_json, load_module

HERE = Path(__file__).resolve().parent
SIM = load_module(HERE / "test_nccl_profiler_plugin_sim.py", "test_nccl_profiler_plugin_sim")


def run(build_dir: Path, env: dict[str, str], work: Path, prog: str = "sim_nccl_ops") -> tuple[dict, "SIM.Log", str]:
    """The rank file's nccl counters, the user's plugin's log, and stderr (the rank file is
    work/out/rank-00000.json, the program's truth work/truth.json)."""
    out, log = work / "out", work / "plugin.log"
    log.unlink(missing_ok=True)
    full = clean_env({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "HOME": str(work),
                      "RECORDING_PLUGIN_LOG": str(log), "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                      "TRAINTIME_OUTPUT": str(out), "TRAINTIME_CUPTI_LIB": str(build_dir / "sim" / "libcupti.so.13")})
    full.update(env)
    (out / "rank-00000.json").unlink(missing_ok=True)
    p = subprocess.run([str(build_dir / "tests" / "nccl" / prog), "--truth", str(work / "truth.json")],
                       env=full, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"sim_nccl_ops failed under the preload (exit {p.returncode}):\n{p.stdout}{p.stderr}"
    doc = load_json(out / "rank-00000.json")
    return doc["modules"]["nccl"]["counters"], SIM.parse(log), p.stderr


def test_no_plugin_of_the_users_nccl_finds_traintimes(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        counters, log, _ = run(build_dir, {}, Path(tmp))
    c.check(counters.get("profiler_plugin_inits") == 2, f"NCCL did not init traintime's plugin per communicator: {counters}")
    c.check(counters.get("profiler_plugin_version") == 7, f"not the newest version: {counters}")
    c.check(counters.get("profiler_plugin_chained_version") == 0, f"chained to nothing: {counters}")
    c.check(counters.get("profiler_plugin_coll_events", 0) > 0, f"no collective events: {counters}")
    c.check(not log.inits, "the user's plugin was loaded although nothing named it")
    c.done()


def test_the_users_plugin_is_chained_and_sees_what_it_sees_alone(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        alone = SIM.run(build_dir, 2, {"NCCL_PROFILER_PLUGIN": SIM.recorder(build_dir)}, work)
        counters, log, _ = run(build_dir, {"NCCL_PROFILER_PLUGIN": SIM.recorder(build_dir)}, work)
    c.check(counters.get("profiler_plugin_chained_version") == 7, f"not chained: {counters}")
    c.check(counters.get("profiler_plugin_inits") == 2, f"traintime's own plugin: {counters}")
    SIM.check_hierarchy(c, log)
    kinds = lambda lg: sorted((e.type, e.fields.get("func", "")) for e in lg.events.values())  # noqa: E731
    c.check(kinds(log) == kinds(alone), "the chained plugin saw other events than it sees without traintime")
    c.check(len(log.inits) == len(alone.inits) == 2, f"inits {len(log.inits)}, alone {len(alone.inits)}")
    c.check(log.finalizes == 2, f"{log.finalizes} finalizes of the chained plugin")
    c.done()


def test_the_chained_plugin_keeps_its_own_mask(build_dir: Path) -> None:
    """A plugin asking for collectives only gets those (and their parents), not traintime's."""
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        counters, log, _ = run(build_dir, {"NCCL_PROFILER_PLUGIN": SIM.recorder(build_dir),
                                           "RECORDING_PLUGIN_MASK": str(SIM.COLL)}, Path(tmp))
    kinds = {e.type for e in log.events.values()}
    c.check(kinds == {SIM.GROUP_API, SIM.COLL_API, SIM.GROUP, SIM.COLL},
            f"a plugin asking for Coll events got kinds {sorted(kinds)} (NCCL sends Coll and its parents)")
    c.check(counters.get("profiler_plugin_coll_api_events", 0) > 0, f"traintime's own events: {counters}")
    c.done()


def test_the_users_plugin_is_found_wherever_nccl_would_find_it(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        libdir = work / "lib"
        libdir.mkdir()
        recorder = SIM.recorder(build_dir)
        conf = work / "site.conf"
        conf.write_text("NCCL_PROFILER_PLUGIN=recorder\n")
        on_path = {"LD_LIBRARY_PATH": str(SIM.plugin_dir(build_dir))}
        cases = [("NCCL_CONF_FILE", {"NCCL_CONF_FILE": str(conf), **on_path}, None)]
        cases.append(("libnccl-profiler.so on the loader path", {"LD_LIBRARY_PATH": str(libdir)}, "libnccl-profiler.so"))
        cases.append(("the net plugin's profiler", {"LD_LIBRARY_PATH": str(libdir)}, "libnccl-net.so"))
        for what, env, link in cases:
            for name in ("libnccl-profiler.so", "libnccl-net.so"):
                (libdir / name).unlink(missing_ok=True)
            if link:
                os.symlink(recorder, libdir / link)
            counters, log, _ = run(build_dir, env, work)
            c.check(counters.get("profiler_plugin_chained_version") == 7 and len(log.inits) == 2,
                    f"{what}: chained version {counters.get('profiler_plugin_chained_version')}, "
                    f"{len(log.inits)} inits of the user's plugin")
        (work / ".nccl.conf").write_text("NCCL_PROFILER_PLUGIN=recorder\n")  # HOME is `work`
        counters, log, _ = run(build_dir, on_path, work)
        c.check(len(log.inits) == 2, f"~/.nccl.conf: {len(log.inits)} inits of the user's plugin")
    c.done()


def test_none_is_respected_and_traintime_nccl_0_changes_nothing(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        conf = work / "site.conf"
        conf.write_text("NCCL_PROFILER_PLUGIN=none\n")
        for what, env in (("NCCL_PROFILER_PLUGIN=none", {"NCCL_PROFILER_PLUGIN": "none"}),
                          ("none in NCCL_CONF_FILE", {"NCCL_CONF_FILE": str(conf)})):
            counters, log, _ = run(build_dir, env, work)
            c.check("profiler_plugin_inits" not in counters, f"{what}: NCCL loaded traintime's plugin: {counters}")
            rows = load_json(work / "out" / "rank-00000.json")["comm"]
            c.check(rows and all(r.get("seen_by") == "interposer" for r in rows),
                    f"{what}: seen_by {[r.get('seen_by') for r in rows]}, not all 'interposer'")
        counters, log, _ = run(build_dir, {"TRAINTIME_NCCL": "0", "NCCL_PROFILER_PLUGIN": SIM.recorder(build_dir)}, work)
        c.check(len(log.inits) == 2 and "profiler_plugin_inits" not in counters,
                f"TRAINTIME_NCCL=0: the user's plugin inits {len(log.inits)}, traintime's {counters}")
    c.done()


def test_a_failing_chained_init_costs_only_the_chained_plugin(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        counters, log, _ = run(build_dir, {"NCCL_PROFILER_PLUGIN": SIM.recorder(build_dir),
                                           "RECORDING_PLUGIN_FAIL_INIT": "1"}, Path(tmp))
    c.check(counters.get("profiler_plugin_chained_init_failures") == 2, f"{counters}")
    c.check(counters.get("profiler_plugin_coll_events", 0) > 0, f"traintime lost its own events: {counters}")
    c.check(not log.events and log.finalizes == 0, f"events after the chained plugin's failed init: {len(log.events)}")
    c.done()


def comm_rows(doc: dict) -> list[tuple[str, int, int]]:
    return sorted((r["op"], r["calls"], r["bytes"]) for r in doc["comm"])


def test_nccl_bound_inside_the_program_is_counted_sized_and_timed_from_plugin_events(build_dir: Path) -> None:
    """sim_nccl_ops_static_nccl has simgpu's NCCL linked inside it with hidden symbols: no
    interposer sees its calls. The plugin's events count and size every call as the truth says,
    and the kernels join their calls (GPU time per op, every op completed)."""
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        counters, _, _ = run(build_dir, {}, work, "sim_nccl_ops_static_nccl")
        doc, truth = load_json(work / "out" / "rank-00000.json"), load_json(work / "truth.json")
    c.check(counters.get("profiler_plugin_counted_calls", 0) > 0, f"nothing counted from plugin events: {counters}")
    c.check(comm_rows(doc) == sorted((r["op"], r["calls"], r["bytes"]) for r in truth["comm"]),
            f"comm rows {comm_rows(doc)} differ from the truth {truth['comm']}")
    for row in doc["comm"]:
        c.check(row["gpu_ns"] > 0 or row["op"] in ("Send", "Recv"), f"{row['op']}: no GPU time joined: {row}")
        c.check(row.get("seen_by") == "plugin", f"{row['op']}: seen_by {row.get('seen_by')!r}, not 'plugin'")
    for comm in doc["communicators"]:
        c.check(comm["ops_enqueued"] > 0 and comm["ops_completed"] == comm["ops_enqueued"],
                f"communicator {comm['id']}: {comm['ops_completed']} of {comm['ops_enqueued']} ops completed")
    c.done()


def test_with_both_paths_each_call_counts_once(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        counters, _, _ = run(build_dir, {}, work)
        doc, truth = load_json(work / "out" / "rank-00000.json"), load_json(work / "truth.json")
    c.check(counters.get("profiler_plugin_coll_api_events", 0) > 0, f"the plugin saw no calls: {counters}")
    c.check(counters.get("profiler_plugin_counted_calls") == 0, f"interposed calls counted again: {counters}")
    c.check(comm_rows(doc) == sorted((r["op"], r["calls"], r["bytes"]) for r in truth["comm"]),
            f"comm rows {comm_rows(doc)} differ from the truth {truth['comm']}")
    for row in doc["comm"]:
        c.check(row.get("seen_by") == "both", f"{row['op']}: seen_by {row.get('seen_by')!r}, not 'both'")
    c.done()


def test_a_plugin_of_an_unknown_version_is_left_to_nccl_with_one_warning(build_dir: Path) -> None:
    c = Checks()
    future = str(SIM.plugin_dir(build_dir) / "libnccl-profiler-future.so")
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        env = {"NCCL_PROFILER_PLUGIN": future}
        counters, _, stderr = run(build_dir, env, work)
    warnings = [line for line in stderr.splitlines() if "ncclProfiler_v9" in line]
    c.check(len(warnings) == 1 and future in warnings[0], f"expected one warning naming {future} and v9: {stderr}")
    c.check("profiler_plugin_inits" not in counters, f"traintime took the place of the user's plugin: {counters}")
    c.done()
