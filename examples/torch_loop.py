#!/usr/bin/env python3
"""A PyTorch training loop annotated for traintime, timing its regions with CUDA events too.

    LD_PRELOAD=build/lib/libtraintime.so python3 examples/torch_loop.py --api region
    LD_PRELOAD=build/lib/libtraintime.so python3 examples/torch_loop.py --api instrument
    LD_PRELOAD=build/lib/libtraintime.so torchrun --nproc-per-node 2 examples/torch_loop.py

An MLP (`layers` hidden x hidden Linear+ReLU, then hidden x classes, no biases, fp32 with TF32
off) on synthetic data, one CUDA stream (PyTorch's current stream carries the copy, forward,
backward and optimizer kernels), so each region's CUDA-event pair measures the same work as
traintime's regions[].gpu_span_ns. scripts/compare_events.py compares the two.

--api region      the plain API: `with traintime.region("io" | "forward" | "backward" |
                  "optimizer")` and traintime.step(samples=...). The compared paths are exactly
                  those names.
--api instrument  traintime.torch.instrument(model, optimizer), the one-line experience, plus
                  `with traintime.region("io")` for the copy. Events are recorded around
                  model+loss ("forward"), loss.backward() ("backward") and optimizer.step()
                  ("optimizer"); those paths are what instrument is expected to name, so this
                  mode is compared for information only.

Options for the real-stack checks of docs/validation.md (scripts/check_gpu_run.py judges them):
--cuda-graphs      forward and backward are captured once into a torch.cuda.CUDAGraph inside
                   `traintime.region("forward")` / `("backward")`, and each step replays it inside
                   `traintime.region("replay")`: the replayed kernels must land in the captured
                   regions. The events file then times "io" and "optimizer" as usual and the
                   whole replay under "graph_replay".
--profile-steps A:B  a torch.profiler session (CPU and CUDA activities) records steps A to B-1,
                   in the middle of the traintime run, the way users profile: a schedule of one
                   warm-up step (A-1) and B-A active steps, prof.step() after each step, so the
                   trace holds a ProfilerStep#N range per step (#1 is step A). --profile-trace
                   PATH exports its Chrome trace (gzipped when PATH ends in .gz). The user's
                   profiler must see kernels and traintime stay exact.
--metrics-log PATH traintime.metrics() after every step, one JSON object per line (rank 0).

All GPU work of the program runs inside a region (model set-up in "setup", the final loss read
in "final"), so an annotated run must have no unattributed GPU work. Warm-up steps run inside
`traintime.region("warmup")`, keeping one-time costs (cuBLAS handles, allocator growth) out of
the compared rows. With several ranks (torchrun's RANK/WORLD_SIZE),
gradients are averaged with torch.distributed (NCCL) inside a "comm" region within backward.
Without CUDA it runs on the CPU with small sizes and writes no events file.
"""

import argparse
import contextlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# After PYTHONPATH, so an explicitly chosen traintime package wins over the repository copy.
sys.path.append(os.path.join(HERE, "..", "annotate", "python"))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_loop.py: PyTorch is not installed for " + sys.executable)
try:
    import traintime
except ImportError as e:
    sys.exit(f"torch_loop.py: cannot import traintime ({e}); it lives in annotate/python")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api", choices=["region", "instrument"], default="region")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--classes", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--events-out", help="CUDA-event timings as JSON; %%r becomes the rank")
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="capture forward+backward in a CUDA graph and replay it each step")
    ap.add_argument("--profile-steps", metavar="A:B",
                    help="run a torch.profiler session from step A to step B (0-based, B exclusive)")
    ap.add_argument("--profile-trace", help="where --profile-steps exports its Chrome trace")
    ap.add_argument("--metrics-log", help="traintime.metrics() after each step, as JSON lines")
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    a.profile_window = None
    if a.profile_steps:
        try:
            lo, hi = (int(v) for v in a.profile_steps.split(":"))
        except ValueError:
            ap.error(f"--profile-steps wants A:B (two step numbers), not {a.profile_steps!r}")
        if not 1 <= lo < hi <= a.steps:
            ap.error(f"--profile-steps {a.profile_steps}: want 1 <= A < B <= --steps ({a.steps}); "
                     "step A-1 is the profiler's warm-up step")
        a.profile_window = (lo, hi)
    if a.cuda_graphs and a.api != "region":
        ap.error("--cuda-graphs goes with --api region (the captured regions are named there)")
    return a


PROFILER_RANGES = False  # --profile-steps: the step's regions are torch.profiler ranges too


def region(name):
    """traintime.region(name); with --profile-steps also a torch.profiler range of the same name,
    so the profiler's trace carries the regions: replayed through simgpu in annotated mode (their
    user_annotation ranges become NVTX ranges), the trace then gives the same categories as the
    rank file of the run that recorded it."""
    if not PROFILER_RANGES:
        return traintime.region(name)
    stack = contextlib.ExitStack()
    stack.enter_context(traintime.region(name))
    stack.enter_context(torch.profiler.record_function(name))
    return stack


class RegionEvents:
    """A CUDA-event pair per (region, step) on the current stream. Reading them synchronises,
    so it happens once, after the loop; traintime itself never synchronises."""

    def __init__(self, paths, steps):
        self.paths = list(paths)
        self.ev = {p: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                       for _ in range(steps)] for p in self.paths}

    def begin(self, path, step):
        self.ev[path][step][0].record()

    def end(self, path, step):
        self.ev[path][step][1].record()

    def read(self):
        torch.cuda.synchronize()
        return {p: [b.elapsed_time(e) for b, e in pairs] for p, pairs in self.ev.items()}


class NoEvents:
    def begin(self, path, step):
        pass

    def end(self, path, step):
        pass


def main():
    global PROFILER_RANGES
    a = parse_args()
    PROFILER_RANGES = a.profile_window is not None
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local % torch.cuda.device_count())
        dev = torch.device("cuda")
        # fp32 matmuls should keep every region above 1 ms at the default sizes (an estimate
        # from FLOPs and fp32 peak, not measured: this has not run on a GPU yet).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    else:
        dev = torch.device("cpu")
    batch = a.batch or (4096 if cuda else 64)
    hidden = a.hidden or (4096 if cuda else 256)
    layers = a.layers or (8 if cuda else 2)

    if world > 1:
        if a.cuda_graphs:
            sys.exit("torch_loop.py: --cuda-graphs runs at world size 1 (no collectives in the graph)")
        import torch.distributed as dist
        dist.init_process_group("nccl" if cuda else "gloo")
    if a.cuda_graphs and not cuda:
        sys.exit("torch_loop.py: --cuda-graphs needs a CUDA device")

    # Every GPU operation of the program runs inside a region: an annotated run has no
    # unattributed GPU work (scripts/check_gpu_run.py context).
    with traintime.region("setup"):
        torch.manual_seed(1234)
        mods = []
        for _ in range(layers):
            mods += [torch.nn.Linear(hidden, hidden, bias=False), torch.nn.ReLU()]
        mods.append(torch.nn.Linear(hidden, a.classes, bias=False))
        model = torch.nn.Sequential(*mods).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=a.lr)
        if a.api == "instrument":
            import traintime.torch as traintime_torch  # only this mode needs the PyTorch helper
            traintime_torch.instrument(model, opt)

        g = torch.Generator().manual_seed(rank)
        pin = cuda
        xs = [torch.randn(batch, hidden, generator=g).pin_memory() if pin else
              torch.randn(batch, hidden, generator=g) for _ in range(2)]
        ys = [torch.randint(0, a.classes, (batch,), generator=g) for _ in range(2)]
        ys = [y.pin_memory() if pin else y for y in ys]

    comm = world > 1
    if a.cuda_graphs:
        paths = ["io", "optimizer"]  # the replay is timed separately: see graph_replays
    else:
        paths = ["io", "forward", "backward"] + (["backward/comm"] if comm else []) + ["optimizer"]

    graph = None
    graph_replays = []  # (start, end) event pairs around every replay, warm-up ones included
    if a.cuda_graphs:
        with traintime.region("setup"):
            x_static = torch.empty(batch, hidden, device=dev)
            y_static = torch.empty(batch, dtype=torch.long, device=dev)
            x_static.copy_(xs[0])
            y_static.copy_(ys[0])
        # PyTorch's whole-network capture recipe: warm up on a side stream, then capture with
        # the gradients unset so the replay writes them (no zero_grad needed between replays).
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with traintime.region("warmup"), torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(x_static), y_static).backward()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        # Entering and leaving the capture launches work of its own (the CUDA generator's graph
        # state is filled at capture begin): inside "setup", so that nothing is unattributed,
        # while the captured work itself is in "forward" and "backward".
        capture = torch.cuda.graph(graph)
        with traintime.region("setup"):
            capture.__enter__()
        with traintime.region("forward"):
            static_loss = F.cross_entropy(model(x_static), y_static)
        with traintime.region("backward"):
            static_loss.backward()
        with traintime.region("setup"):
            capture.__exit__(None, None, None)

    def step(i, ev):
        slot = max(i, 0) % 2
        if graph is not None:
            with region("io"):
                ev.begin("io", i)
                x_static.copy_(xs[slot], non_blocking=True)
                y_static.copy_(ys[slot], non_blocking=True)
                ev.end("io", i)
            with region("replay"):
                pair = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                pair[0].record()
                graph.replay()
                pair[1].record()
                graph_replays.append(pair)
            with region("optimizer"):
                ev.begin("optimizer", i)
                opt.step()
                ev.end("optimizer", i)
            traintime.step(samples=batch)
            return static_loss
        with region("io"):
            ev.begin("io", i)
            x = xs[slot].to(dev, non_blocking=True)
            y = ys[slot].to(dev, non_blocking=True)
            ev.end("io", i)
        if a.api == "region":
            with region("forward"):
                ev.begin("forward", i)
                loss = F.cross_entropy(model(x), y)
                ev.end("forward", i)
            with region("backward"):
                ev.begin("backward", i)
                loss.backward()
                ev.end("backward", i)
                if comm:
                    with region("comm"):
                        ev.begin("backward/comm", i)
                        for p in model.parameters():
                            torch.distributed.all_reduce(p.grad)
                            p.grad.div_(world)
                        ev.end("backward/comm", i)
            with region("optimizer"):
                ev.begin("optimizer", i)
                opt.step()
                opt.zero_grad()
                ev.end("optimizer", i)
        else:
            ev.begin("forward", i)
            loss = F.cross_entropy(model(x), y)
            ev.end("forward", i)
            ev.begin("backward", i)
            loss.backward()
            ev.end("backward", i)
            if comm:
                ev.begin("backward/comm", i)
                for p in model.parameters():
                    torch.distributed.all_reduce(p.grad)
                    p.grad.div_(world)
                ev.end("backward/comm", i)
            ev.begin("optimizer", i)
            opt.step()
            opt.zero_grad()
            ev.end("optimizer", i)
        traintime.step(samples=batch)
        return loss

    metrics = []

    def log_metrics():
        if a.metrics_log and rank == 0:
            m = traintime.metrics()
            m["wall_s"] = time.time()
            metrics.append(m)

    for w in range(a.warmup):
        if cuda and w == a.warmup - 1:
            # Warm-up done but for one step, left running: an event pair measures from the moment
            # the stream reaches its begin event, which on an idle GPU is when the CPU recorded it,
            # before the region's first work was even enqueued (0.2 ms of CPU time in the first
            # step's io, seen on an H200). With the last warm-up step still on the GPU, the first
            # timed step starts as every other does, behind queued work.
            torch.cuda.synchronize()
        with traintime.region("warmup"):
            step(-1, NoEvents())
        log_metrics()
    if cuda and a.warmup == 0:
        torch.cuda.synchronize()
    ev = RegionEvents(paths, a.steps) if cuda else NoEvents()
    prof = None
    t0 = time.perf_counter()
    def trace_ready(p):
        if a.profile_trace:
            p.export_chrome_trace(a.profile_trace.replace("%r", str(rank)))

    def pad():
        # After the profiler's start or stop (its trace processed and exported: CPU time during
        # which the GPU drains), the next step would record its first begin event on an idle GPU,
        # where an event pair measures from the CPU's record, not from the region's first work
        # (0.16 ms more in that step's io, seen on an H200). A short spin kernel ahead of it, in
        # a region of its own, keeps the CUDA events a fair reference.
        if cuda:
            with traintime.region("pad"):
                torch.cuda._sleep(2_000_000)  # about 1 ms at Hopper's clock

    for i in range(a.steps):
        if a.profile_window and i == a.profile_window[0] - 1:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if cuda:
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            lo, hi = a.profile_window
            prof = torch.profiler.profile(
                activities=activities, on_trace_ready=trace_ready,
                schedule=torch.profiler.schedule(wait=0, warmup=1, active=hi - lo, repeat=1))
            prof.start()
            pad()
        loss = step(i, ev)
        log_metrics()
        if prof is not None:
            prof.step()  # ends ProfilerStep#k; after the last active step the trace is exported
            if i == a.profile_window[1] - 1:
                prof.stop()
                prof = None
                pad()
    with traintime.region("final"):
        final = loss.item()  # synchronises: after the loop only
    wall = time.perf_counter() - t0
    log_metrics()
    if metrics:
        with open(a.metrics_log, "w", encoding="utf-8") as f:
            for m in metrics:
                f.write(json.dumps(m) + "\n")

    if cuda and a.events_out:
        ms = ev.read()
        out = {
            "schema": "traintime-example-events/1",
            "program": f"torch_loop --api {a.api}",
            "rank": rank, "world_size": world, "launcher": "torchrun" if "RANK" in os.environ
            else "single", "device": torch.cuda.get_device_name(),
            "timing": "torch.cuda.Event.elapsed_time read once after the loop's synchronize",
            "steps": a.steps, "warmup_steps": a.warmup,
            "config": {"batch": batch, "hidden": hidden, "layers": layers, "classes": a.classes,
                       "api": a.api, "cuda_graphs": a.cuda_graphs, "torch": torch.__version__},
            "regions": [{"path": p, "single_stream": True, "entries": len(v),
                         "total_ms": sum(v), "per_step_ms": v} for p, v in ms.items()],
            "comm": [],
            "notes": ["events bracket stream work only; reading them synchronised the stream, "
                      "which traintime never does"],
        }
        if a.api == "instrument":
            out["notes"].append("paths are the names traintime.torch.instrument is expected to "
                                "use; compared for information only")
        if graph is not None:
            replay_ms = [b.elapsed_time(e) for b, e in graph_replays]
            out["graph_replay"] = {
                "captured_paths": ["forward", "backward"], "replays": len(replay_ms),
                "total_ms": sum(replay_ms), "per_replay_ms": replay_ms,
                "note": "every replay of the graph, warm-up replays included; the replayed "
                        "kernels belong to the regions open at capture"}
        if a.profile_window:
            # ProfilerStep#k (k >= 1) of the trace is timed step A+k-1, which is traintime's step
            # warmup+A+k-1 (the warm-up steps call traintime.step too).
            out["profiler_window"] = list(a.profile_window)
            out["profiler_steps"] = {f"ProfilerStep#{k}": a.warmup + a.profile_window[0] + k - 1
                                     for k in range(1, a.profile_window[1] - a.profile_window[0] + 1)}
        # What the caching allocator reserved from the driver at most (no synchronisation): with
        # expandable segments all of it is CUDA virtual memory (check_gpu_run.py memory).
        out["memory"] = {"max_memory_reserved": int(torch.cuda.max_memory_reserved()),
                         "allocator_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
        with open(a.events_out.replace("%r", str(rank)), "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
    if rank == 0:
        print(f"torch_loop ({a.api}): {dev}, world size {world}, {a.steps} steps after "
              f"{a.warmup} warm-up, {wall / a.steps * 1e3:.2f} ms/step wall, final loss {final:.4f}")
        if not cuda:
            print("torch_loop: no CUDA device, so no CUDA events were recorded")
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
