"""simgpu's NCCL calls a profiler plugin as NCCL's source does (tests/sim/src/nccl_profiler.h):
found as NCCL finds one, probed newest version first, init once per communicator with the one
live activation mask, NCCL's event hierarchy, kernel-channel events from a proxy thread, and at
world size 1 only init and the API-level events. The plugin is recording_profiler_plugin.cpp,
which logs every call; the program is sim_nccl_ops, run as rank 0 of 1 or 2 (simgpu's ranks
never talk, so one process plays rank 0 of 2 without mpirun). No libtraintime.so here.
"""
from __future__ import annotations

import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from testlib import Checks, clean_env

GROUP, COLL, P2P, KERNEL_CH = 1, 2, 4, 64
GROUP_API, COLL_API, P2P_API, KERNEL_LAUNCH = 256, 512, 1024, 2048
KERNEL_CH_STOP, GROUP_START_API_STOP, GROUP_END_API_START = 22, 23, 24


@dataclass
class Event:
    fields: dict[str, str]
    states: list[tuple[int, int]] = field(default_factory=list)  # (state, timer)
    stopped: bool = False

    @property
    def type(self) -> int:
        return int(self.fields["type"])


@dataclass
class Log:
    inits: list[dict[str, str]]
    events: dict[int, Event]
    finalizes: int


def parse(path: Path) -> Log:
    inits, events, finalizes = [], {}, 0
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    for line in text.splitlines():
        verb, *rest = line.split()
        kv = dict(item.split("=", 1) for item in rest if "=" in item)
        if verb == "init":
            kv["version"] = rest[0]
            inits.append(kv)
        elif verb == "start":
            kv["version"] = rest[0]
            events[int(kv["id"])] = Event(kv)
        elif verb == "state":
            events[int(kv["id"])].states.append((int(kv["state"]), int(kv["timer"])))
        elif verb == "stop":
            events[int(kv["id"])].stopped = True
        elif verb == "finalize":
            finalizes += 1
    return Log(inits, events, finalizes)


def plugin_dir(build_dir: Path) -> Path:
    return build_dir / "tests" / "nccl" / "profiler_plugins"


def run(build_dir: Path, world: int, env: dict[str, str], work: Path, args: tuple[str, ...] = ()) -> Log:
    log = work / "plugin.log"
    log.unlink(missing_ok=True)
    full = clean_env({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": str(world), "HOME": str(work),
                      "RECORDING_PLUGIN_LOG": str(log)})
    full.update(env)
    p = subprocess.run([str(build_dir / "tests" / "nccl" / "sim_nccl_ops"), "--truth", str(work / "truth.json"), *args],
                       env=full, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"sim_nccl_ops failed (exit {p.returncode}):\n{p.stdout}{p.stderr}"
    return parse(log)


def recorder(build_dir: Path) -> str:
    return str(plugin_dir(build_dir) / "libnccl-profiler-recorder.so")


def test_world_size_1_gives_init_and_api_events_only(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_prof_") as tmp:
        log = run(build_dir, 1, {"NCCL_PROFILER_PLUGIN": recorder(build_dir)}, Path(tmp))
    c.check(len(log.inits) == 2, f"{len(log.inits)} inits for sim_nccl_ops's 2 communicators: {log.inits}")
    c.check(len({i["mask"] for i in log.inits}) == 1, f"each init got another activation mask: {log.inits}")
    c.check(all(i["version"] == "v7" for i in log.inits), f"not the newest version: {log.inits}")
    c.check(log.finalizes == 2, f"{log.finalizes} finalizes for 2 communicators")
    kinds = Counter(e.type for e in log.events.values())
    c.check(kinds[COLL_API] > 0 and kinds[GROUP_API] > 0, f"no API events at world size 1: {kinds}")
    c.check(kinds[COLL] == 0, f"collective task events at world size 1, where NCCL enqueues none: {kinds}")
    c.check(all(e.stopped for e in log.events.values()), "an event was never stopped")
    c.done()


def check_hierarchy(c: Checks, log: Log) -> None:
    """NCCL's event hierarchy, as a plugin sees it at world size 2 with every kind asked for."""
    ev = log.events
    kinds = Counter(e.type for e in ev.values())
    for kind in (GROUP_API, COLL_API, P2P_API, KERNEL_LAUNCH, GROUP, COLL, P2P, KERNEL_CH):
        c.check(kinds[kind] > 0, f"no events of kind {kind}: {kinds}")
    seqs: dict[tuple[str, str], list[int]] = {}
    for i, e in ev.items():
        f = e.fields
        parent = ev.get(int(f["parent"]))
        if e.type == COLL:
            c.check(parent is not None and parent.type == COLL_API and parent.fields["func"] == f["func"],
                    f"Coll {i} ({f['func']}) is not the child of its CollApi event: {parent}")
            group = ev.get(int(f["group"]))
            c.check(group is not None and group.type == GROUP, f"Coll {i}'s parentGroup is no Group event")
            seqs.setdefault((f["ctx"], f["func"]), []).append(int(f["seq"]))
        elif e.type in (COLL_API, P2P_API):
            c.check(parent is not None and parent.type == GROUP_API, f"API event {i} has no GroupApi parent")
        elif e.type == GROUP_API:
            states = [s for s, _ in e.states]
            c.check(states == [GROUP_START_API_STOP, GROUP_END_API_START], f"GroupApi {i} states {states}")
        elif e.type == KERNEL_CH:
            c.check(parent is not None and parent.type in (COLL, P2P), f"KernelCh {i}'s parent is no task event")
            if parent is not None:
                c.check(parent.fields["tid"] != f["tid"], f"KernelCh {i} came from the thread that enqueued")
            stops = [t for s, t in e.states if s == KERNEL_CH_STOP]
            c.check(len(stops) == 1 and stops[0] > int(f["timer"]), f"KernelCh {i}: start {f['timer']}, stops {stops}")
        c.check(e.stopped, f"event {i} (kind {e.type}) was never stopped")
    for key, numbers in seqs.items():
        c.check(numbers == list(range(len(numbers))), f"seqNumber of {key} runs {numbers}: not 0, 1, 2 ...")
    c.check(len({ctx for ctx, _ in seqs}) == 2, f"both communicators' collectives: {sorted(seqs)}")


def test_world_size_2_follows_nccls_event_hierarchy(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_prof_") as tmp:
        log = run(build_dir, 2, {"NCCL_PROFILER_PLUGIN": recorder(build_dir)}, Path(tmp))
    check_hierarchy(c, log)
    c.done()


def test_an_older_nccl_probes_its_newest_version_first(build_dir: Path) -> None:
    """NCCL 2.28 probes v5 first (API events), 2.25 v4 (no API events), 2.23 v3 (no GPU timers)."""
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_prof_") as tmp:
        for newest, api, kernel_ch in (("5", True, True), ("4", False, True), ("3", False, False)):
            log = run(build_dir, 2, {"NCCL_PROFILER_PLUGIN": recorder(build_dir),
                                     "SIMGPU_NCCL_PROFILER_MAX_VERSION": newest}, Path(tmp))
            kinds = Counter(e.type for e in log.events.values())
            c.check({i["version"] for i in log.inits} == {f"v{newest}"}, f"NCCL probing v{newest}: {log.inits}")
            c.check((kinds[COLL_API] > 0) == api, f"v{newest}: API events {kinds[COLL_API]}")
            c.check((kinds[KERNEL_CH] > 0) == kernel_ch, f"v{newest}: KernelCh events {kinds[KERNEL_CH]}")
            c.check(kinds[COLL] > 0, f"v{newest}: no Coll events {kinds}")
    c.done()


def test_the_plugin_is_found_as_nccl_finds_it(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_prof_") as tmp:
        work = Path(tmp)
        on_path = {"LD_LIBRARY_PATH": str(plugin_dir(build_dir))}
        conf = work / "nccl.conf"
        conf.write_text("# a site's settings\nNCCL_PROFILER_PLUGIN=recorder\n")
        cases = [
            ("a short name, as libnccl-profiler-<name>.so", {"NCCL_PROFILER_PLUGIN": "recorder", **on_path}, 2),
            ("NCCL_CONF_FILE", {"NCCL_CONF_FILE": str(conf), **on_path}, 2),
            ("none, over a configuration file", {"NCCL_PROFILER_PLUGIN": "none", "NCCL_CONF_FILE": str(conf),
                                                 **on_path}, 0),
            ("no variable and no libnccl-profiler.so", on_path, 0),
        ]
        for what, env, inits in cases:
            log = run(build_dir, 1, env, work)
            c.check(len(log.inits) == inits, f"{what}: {len(log.inits)} inits, expected {inits}")
        (work / ".nccl.conf").write_text("NCCL_PROFILER_PLUGIN=recorder\n")  # HOME is `work`
        log = run(build_dir, 1, on_path, work)
        c.check(len(log.inits) == 2, f"~/.nccl.conf: {len(log.inits)} inits, expected 2")
    c.done()


def test_a_failed_init_leaves_nccl_working_without_the_plugin(build_dir: Path) -> None:
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_prof_") as tmp:
        log = run(build_dir, 2, {"NCCL_PROFILER_PLUGIN": recorder(build_dir), "RECORDING_PLUGIN_FAIL_INIT": "1"},
                  Path(tmp))
    c.check(len(log.inits) == 2, f"{len(log.inits)} inits")
    c.check(not log.events and log.finalizes == 0, f"events after a failed init: {len(log.events)}")
    c.done()


PROXY_OP, PROXY_STEP = 8, 16
SEND_GPU_WAIT, SEND_WAIT, RECV_WAIT, RECV_FLUSH_WAIT, RECV_GPU_WAIT, PROXY_OP_IN_PROGRESS = 8, 9, 10, 11, 12, 19


def test_the_network_transport_emits_nccls_proxy_events(build_dir: Path) -> None:
    """SIMGPU_NCCL_TRANSPORT=net (tests/sim/src/nccl_net.h), as NCCL's net.cc: per task and channel
    a ProxyOp to the next rank (send) and from the previous (receive), child of its task event,
    with this process's pid, nSteps and chunkSize, ProxyOpInProgress, then its ProxyStep events
    (posted, NCCL's states in order, the step's bytes at SendWait / RecvFlushWait), every one
    stopped; a PXN op (SIMGPU_NCCL_PXN) carries another pid and a parent the recorder must not
    read (it checks the pid first, as NCCL's README asks). The intra-node default has none."""
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="nccl_prof_") as tmp:
        net = run(build_dir, 2, {"NCCL_PROFILER_PLUGIN": recorder(build_dir), "SIMGPU_NCCL_TRANSPORT": "net",
                                 "SIMGPU_NCCL_PXN": "1"}, Path(tmp))
        intra = run(build_dir, 2, {"NCCL_PROFILER_PLUGIN": recorder(build_dir)}, Path(tmp))
    ev = net.events
    ops = {i: e for i, e in ev.items() if e.type == PROXY_OP}
    own = {i: e for i, e in ops.items() if e.fields["pxn"] == "0"}
    pxn = {i: e for i, e in ops.items() if e.fields["pxn"] == "1"}
    c.check(len(own) > 0 and len(pxn) > 0, f"{len(own)} own and {len(pxn)} PXN ProxyOps")
    for i, e in own.items():
        f = e.fields
        parent = ev.get(int(f["parent"]))
        c.check(parent is not None and parent.type in (COLL, P2P), f"ProxyOp {i}'s parent is no task event")
        if parent is not None:
            c.check(parent.fields["tid"] != f["tid"], f"ProxyOp {i} came from the thread that enqueued")
        c.check(int(f["chunk"]) == 65536 and int(f["steps"]) >= 1, f"ProxyOp {i}: {f}")
        c.check(f["peer"] == "1", f"ProxyOp {i}: rank 0 of 2 has rank 1 as its peer both ways: {f}")
        c.check([s for s, _ in e.states] == [PROXY_OP_IN_PROGRESS], f"ProxyOp {i} states {e.states}")
        c.check(e.stopped, f"ProxyOp {i} was never stopped")
    for i, e in pxn.items():
        c.check(e.fields["parent"] == "0" and e.stopped, f"PXN ProxyOp {i}: {e.fields}")
    sends = sum(1 for e in own.values() if e.fields["send"] == "1")
    c.check(sends * 2 == len(own), f"{sends} sends of {len(own)} ProxyOps: a ring sends and receives on each channel")
    steps = [e for e in ev.values() if e.type == PROXY_STEP]
    c.check(len(steps) > 0, "no ProxyStep events with every kind asked for")
    for e in steps:
        op = ev.get(int(e.fields["parent"]))
        c.check(op is not None and op.type == PROXY_OP, f"ProxyStep {e.fields['id']}'s parent is no ProxyOp")
        if op is None:
            continue
        states = [s for s, _ in e.states]
        want = [SEND_GPU_WAIT, SEND_WAIT] if op.fields["send"] == "1" else [RECV_WAIT, RECV_FLUSH_WAIT, RECV_GPU_WAIT]
        c.check(states == want, f"ProxyStep {e.fields['id']} states {states}, NCCL records {want}")
        c.check(e.stopped, f"ProxyStep {e.fields['id']} was never stopped")
    kinds = Counter(e.type for e in intra.events.values())
    c.check(kinds[PROXY_OP] == 0 and kinds[PROXY_STEP] == 0 and kinds[KERNEL_CH] > 0,
            f"the intra-node transport: {kinds}")
    c.done()
