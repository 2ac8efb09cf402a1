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


def run(build_dir: Path, env: dict[str, str], work: Path, prog: str = "sim_nccl_ops",
        args: tuple[str, ...] = ()) -> tuple[dict, "SIM.Log", str]:
    """The rank file's nccl counters, the user's plugin's log, and stderr (the rank file is
    work/out/rank-00000.json, the program's truth work/truth.json)."""
    out, log = work / "out", work / "plugin.log"
    log.unlink(missing_ok=True)
    full = clean_env({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "HOME": str(work),
                      "RECORDING_PLUGIN_LOG": str(log), "LD_PRELOAD": str(build_dir / "lib" / "libtraintime.so"),
                      "TRAINTIME_OUTPUT": str(out), "TRAINTIME_CUPTI_LIB": str(build_dir / "sim" / "libcupti.so.13")})
    full.update(env)
    (out / "rank-00000.json").unlink(missing_ok=True)
    p = subprocess.run([str(build_dir / "tests" / "nccl" / prog), "--truth", str(work / "truth.json"), *args],
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
        c.check(row["gpu_ns"] > 0, f"{row['op']}: no GPU time joined: {row}")
        c.check(row.get("seen_by") == "plugin", f"{row['op']}: seen_by {row.get('seen_by')!r}, not 'plugin'")
    check_send_recv_share(c, doc, "CUPTI")
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


def check_send_recv_share(c: Checks, doc: dict, what: str) -> None:
    """sim_nccl_ops groups a Send and a Recv of the same size into one kernel: each gets half its
    time (split by bytes, as the wrappers' groups are), not the first op all of it."""
    rows = {r["op"]: r for r in doc["comm"]}
    send, recv = rows["Send"]["gpu_ns"], rows["Recv"]["gpu_ns"]
    c.check(send > 0 and recv > 0 and abs(send - recv) <= 3,
            f"{what}: the grouped Send+Recv kernel is not split evenly: Send {send} ns, Recv {recv} ns")


def world_of(doc: dict, truth: dict) -> dict:
    """The rank file's `world` communicator (sim_nccl_ops' first; `twin` has as many ranks)."""
    enqueued = {t["name"]: t["ops_enqueued"] for t in truth["communicators"]}
    [world] = [m for m in doc["communicators"] if m["ops_enqueued"] == enqueued["world"]]
    return world


def test_without_cupti_collectives_are_timed_by_nccls_kernel_channel_timers(build_dir: Path) -> None:
    """NCCL bound inside the program and CUPTI not capturing (off, or a libcupti that cannot be
    loaded): every collective's GPU time, the completed sequence numbers and the recent ring come
    from the plugin's kernel-channel events; the grouped Send+Recv kernel is split across both."""
    c = Checks()
    cases = (("TRAINTIME_CUPTI=0", {"TRAINTIME_CUPTI": "0"}),
             ("a libcupti refused", {"TRAINTIME_CUPTI_LIB": "/nonexistent/libcupti.so.13"}),
             ("NCCL 2.25 (plugin v4: no API events, a task's parent is its Group)",
              {"TRAINTIME_CUPTI": "0", "SIMGPU_NCCL_PROFILER_MAX_VERSION": "4"}))
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        for what, env in cases:
            counters, _, _ = run(build_dir, env, work, "sim_nccl_ops_static_nccl")
            doc, truth = load_json(work / "out" / "rank-00000.json"), load_json(work / "truth.json")
            c.check(doc["gpu_capture"] != "cupti", f"{what}: CUPTI captured after all")
            c.check(counters.get("profiler_plugin_kernel_ch") == 1, f"{what}: KernelCh not requested: {counters}")
            c.check(comm_rows(doc) == sorted((r["op"], r["calls"], r["bytes"]) for r in truth["comm"]),
                    f"{what}: comm rows {comm_rows(doc)} differ from the truth")
            for row in doc["comm"]:
                c.check(row["gpu_ns"] > 0 and row["busbw_gbps"] >= 0, f"{what}: {row['op']} has no GPU time: {row}")
            check_send_recv_share(c, doc, what)
            for comm in doc["communicators"]:
                c.check(comm["ops_enqueued"] > 0 and comm["ops_completed"] == comm["ops_enqueued"],
                        f"{what}: communicator {comm['id']}: {comm['ops_completed']} of {comm['ops_enqueued']} completed")
                seqs = [r["seq"] for r in comm["recent"]]
                c.check(seqs == list(range(1, comm["ops_enqueued"] + 1)),
                        f"{what}: communicator {comm['id']}: recent seqs {seqs}")
                c.check(all(r["gpu_end_ns"] > r["gpu_start_ns"] for r in comm["recent"]),
                        f"{what}: a recent collective without a GPU span: {comm['recent']}")
    c.done()


def agreement(c: Checks, doc: dict, what: str) -> None:
    """Every collective of the recent rings has NCCL's own GPU time beside CUPTI's, within 2 us +
    1 % of it (KernelCh spans first channel's start to last channel's stop, CUPTI the kernel)."""
    n = 0
    for comm in doc["communicators"]:
        c.check(comm["recent"], f"{what}: communicator {comm['id']} has no recent collectives")
        for r in comm["recent"]:
            cupti = r["gpu_end_ns"] - r["gpu_start_ns"]
            kch = r.get("kernel_ch_ns")
            if not c.check(kch is not None, f"{what}: {r['op']} seq {r['seq']}: no kernel_ch_ns"):
                continue
            n += 1
            c.check(abs(kch - cupti) <= 2000 + cupti // 100,
                    f"{what}: {r['op']} seq {r['seq']} on {comm['id']}: KernelCh {kch} ns, CUPTI {cupti} ns")
    c.check(n > 20, f"{what}: only {n} collectives compared")


def test_with_cupti_too_nccls_timers_agree_with_cuptis_per_collective(build_dir: Path) -> None:
    """Both paths (interposed wrappers and plugin) and the plugin alone (NCCL inside the program),
    on AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, ... interleaved on one communicator:
    NCCL numbers each collective type on its own (coll.seqNumber), so each kernel-channel span is
    joined to traintime's call per (communicator, type); a join per communicator would put one
    op's time beside another's."""
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        for prog in ("sim_nccl_ops", "sim_nccl_ops_static_nccl"):
            counters, _, _ = run(build_dir, {}, work, prog)
            doc = load_json(work / "out" / "rank-00000.json")
            c.check(doc["gpu_capture"] == "cupti", f"{prog}: CUPTI did not capture")
            c.check(counters.get("profiler_plugin_kernel_ch_collectives", 0) > 0, f"{prog}: {counters}")
            agreement(c, doc, prog)
    c.done()


def test_kernel_channel_events_are_off_on_nccl_2_31_unless_asked(build_dir: Path) -> None:
    """NVIDIA/nccl issue 2355: KernelCh costs GPU time on NCCL 2.31.x. The version is NCCL's own
    (ncclGetVersion; simgpu plays 2.31.5 with SIMGPU_NCCL_VERSION)."""
    c = Checks()
    cases = (("2.31.5", {"SIMGPU_NCCL_VERSION": "23105"}, 23105, 0),
             ("2.31.5, asked", {"SIMGPU_NCCL_VERSION": "23105", "TRAINTIME_NCCL_KERNEL_CH": "1"}, 23105, 1),
             ("2.32.3", {"SIMGPU_NCCL_VERSION": "23203"}, 23203, 1),
             ("2.32.3, refused", {"SIMGPU_NCCL_VERSION": "23203", "TRAINTIME_NCCL_KERNEL_CH": "0"}, 23203, 0))
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        for what, env, version, on in cases:
            counters, _, _ = run(build_dir, env, work)
            doc = load_json(work / "out" / "rank-00000.json")
            c.check(counters.get("profiler_plugin_nccl_version") == version, f"{what}: version read {counters}")
            c.check(counters.get("profiler_plugin_kernel_ch") == on, f"{what}: KernelCh requested: {counters}")
            timed = [r for m in doc["communicators"] for r in m["recent"] if "kernel_ch_ns" in r]
            c.check(bool(timed) == bool(on), f"{what}: {len(timed)} collectives timed by KernelCh")
    c.done()


def test_a_hang_is_named_from_plugin_events_alone(build_dir: Path) -> None:
    """NCCL inside the program, no CUPTI: the collective that never completes is what the hang
    watchdog names, and the rank file's ring and in-flight list name it and what came before."""
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_plugin_") as tmp:
        work = Path(tmp)
        _, _, stderr = run(build_dir, {"TRAINTIME_CUPTI": "0", "TRAINTIME_HANG_SEC": "1"}, work,
                           "sim_nccl_ops_static_nccl", ("--hang", "4"))
        doc, truth = load_json(work / "out" / "rank-00000.json"), load_json(work / "truth.json")
    world = world_of(doc, truth)
    hung = truth["hung_seq"]
    lines = [line for line in stderr.splitlines() if "suspected hang" in line]
    c.check(len(lines) == 1 and f"waiting in AllReduce seq {hung} on communicator {world['id']}" in lines[0],
            f"expected one line naming AllReduce seq {hung} on {world['id']}: {lines}")
    c.check(world["ops_completed"] == hung - 1, f"ops_completed {world['ops_completed']}, hung seq {hung}")
    c.check([(r["op"], r["seq"]) for r in world.get("in_flight", [])] == [("AllReduce", hung)],
            f"in flight: {world.get('in_flight')}")
    last = [(r["op"], r["seq"]) for r in world["recent"][-2:]]
    c.check(last == [("AllGather", hung - 2), ("AllReduce", hung - 1)], f"the ring ends with {last}")
    c.done()
