"""``myxtts profile``: where a training step's time goes, measured, with the setting to change.

What it runs, on a run assembled by ``train.build`` and stepped by the trainer's own loop:

1. warm-up: one step per bucket shape, so every compile happens before anything is timed;
2. timed pass, N steps: batches from the trainer's stream, ``StepTimer`` (data wait, CUDA-event
   step time) plus phase marks at the edges of forward+loss and of ``optimizer.step`` (CUDA events
   on the compute stream, perf_counter on the CPU). This pass runs *without* the profiler, whose
   per-op bookkeeping would inflate host time and make any run look launch-bound;
3. profiled pass, N steps under ``torch.profiler`` (CPU + CUDA activities): the top kernels (top
   CPU ops on the CPU), kernels per step, median kernel time, GPU busy share (union of kernel
   intervals ÷ step time of pass 2), the host-to-device copy not hidden behind kernels, and a
   Chrome trace (``DIR/trace.json``, open it in https://ui.perfetto.dev);
4. host syncs per step (``count_host_syncs``, CUDA only), recompiles after warm-up, MFU (FLOPs
   of each batch shape counted by observe.flops), then ``diagnose`` classifies the run
   input-bound / launch-bound / compute-bound (thresholds in docs/design.md).
"""
from __future__ import annotations

import time
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, record_function

from myxtts.errors import UserError
from myxtts.observe import probes as R
from myxtts.observe.diagnose import diagnose
from myxtts.observe.flops import count_step_flops, mfu
from myxtts.observe.gpu import start_sampler, stop_sampler
from myxtts.observe.measured import Measured, Settings
from myxtts.train.build import build_run
from myxtts.train.loop import Loop, warm_up
from myxtts.train.precision import device_name, sync
from myxtts.train.step import compiled_graphs
from myxtts.train.timers import StepTimer, count_host_syncs

PHASES = ("waiting for data", "host-to-device", "forward", "backward", "optimizer", "other")
TOP = 12
NVML_INTERVAL_S = 0.2  # a timed pass lasts seconds: sample often enough for a mean
OWN = "myxtts/"  # prefix of this module's record_function ranges


class _Marks:
    """Timestamps at phase edges within each step: CUDA events on the current stream (device
    time, read once at the end) or perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.device, self.cuda = device, device.type == "cuda"
        self.steps: list[list] = []
        self._cur: list | None = None
        self._ranges: list = []

    def mark(self, label: str) -> None:
        if self._cur is None:
            return
        if self.cuda:
            m = torch.cuda.Event(enable_timing=True)
            m.record(torch.cuda.current_stream(self.device))
        else:
            m = time.perf_counter()
        self._cur.append((label, m))

    def begin(self) -> None:
        self._cur = []
        self.mark("start")

    def end(self) -> None:
        self.mark("end")
        self.steps.append(self._cur)
        self._cur = None

    def phases_ms(self) -> dict[str, float]:
        """Mean ms per step of forward(+loss), backward (+ clipping), optimizer, and the rest
        of the step (scheduler, zero_grad)."""
        sync(self.device)
        tot = dict.fromkeys(("forward", "backward", "optimizer", "step tail"), 0.0)
        for marks in self.steps:
            t0 = marks[0][1]
            at, fwd, start = {}, 0.0, 0.0
            for lab, m in marks:
                ms = self._ms(t0, m)
                if lab == "fwd0":
                    start = ms
                elif lab == "fwd1":
                    fwd += ms - start  # one forward per micro-batch
                at.setdefault(lab, ms)
            end = at["end"]
            o0, o1 = at.get("opt0", end), at.get("opt1", end)  # no marks: the scaler skipped it
            tot["forward"] += fwd
            tot["backward"] += max(0.0, o0 - fwd)
            tot["optimizer"] += o1 - o0
            tot["step tail"] += end - o1
        n = max(1, len(self.steps))
        return {k: v / n for k, v in tot.items()}

    def _ms(self, a, b) -> float:
        return a.elapsed_time(b) if self.cuda else (b - a) * 1000.0

    # The step calls phase() at the edges of forward+loss and of the optimizer update (a
    # TrainStep hook); each edge is a mark, and each phase a profiler range named OWN + phase.
    _LABEL = {"forward": "fwd0", "forward_end": "fwd1", "optimizer": "opt0", "optimizer_end": "opt1"}

    def phase(self, name: str) -> None:
        if name.endswith("_end"):
            if self._ranges:
                self._ranges.pop().__exit__(None, None, None)
            self.mark(self._LABEL[name])
        else:
            self.mark(self._LABEL[name])
            self._ranges.append(record_function(OWN + ("forward+loss" if name == "forward" else name)))
            self._ranges[-1].__enter__()


# ------------------------------------------------------------------------ interval arithmetic
def _merge(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(iv) -> float:
    return sum(b - a for a, b in iv)


def _overlap(x, y) -> float:
    """Length of the intersection of two merged interval lists."""
    i = j = 0
    total = 0.0
    while i < len(x) and j < len(y):
        lo, hi = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        total += max(0.0, hi - lo)
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return total


# Device-side events that are not kernels: copies, memsets, synchronisation, and the ranges of
# record_function (this module's phases, ProfilerStep#N), which the profiler mirrors onto the
# GPU timeline. Counting those as kernels made an annotation spanning the forward pass look like
# a GPU busy for the whole of it.
NOT_KERNELS = ("Memcpy", "Memset", OWN, "ProfilerStep")
SYNC_EVENTS = {"Context Sync", "Stream Sync", "Event Sync", "Stream Wait Event", "Device Synchronize"}


def event_kind(e) -> str:
    """'kernel', 'h2d' (a host-to-device copy) or 'other' for one device-side profiler event.

    The profiler's own activity type decides where torch records it ("kernel" is a kernel);
    older torch builds without it are judged by the annotation flag and the event's name."""
    if e.name.startswith("Memcpy HtoD"):
        return "h2d"
    kind = getattr(e, "activity_type", None)
    if kind:
        return "kernel" if kind == "kernel" else "other"
    if getattr(e, "is_user_annotation", False) or e.name.startswith(NOT_KERNELS) or e.name in SYNC_EVENTS:
        return "other"
    return "kernel"


def _device_stats(prof, steps: int, step_ms: float) -> dict:
    """Kernel statistics of the profiled pass (CUDA), from kernels only: busy share, kernels per
    step, median kernel, exposed host-to-device copy, top kernels by total time."""
    from torch.autograd import DeviceType

    kernels, copies, by_name = [], [], {}
    for e in prof.events():
        if getattr(e, "device_type", None) != DeviceType.CUDA:
            continue
        iv = (float(e.time_range.start), float(e.time_range.end))
        kind = event_kind(e)
        if kind == "h2d":
            copies.append(iv)
        elif kind == "kernel":
            kernels.append(iv)
            n, us = by_name.get(e.name, (0, 0.0))
            by_name[e.name] = (n + 1, us + iv[1] - iv[0])
    if not kernels:
        return {}
    busy = _merge(kernels)
    cp = _merge(copies)
    exposed_ms = (_length(cp) - _overlap(cp, busy)) / 1000.0 / steps
    total_us = sum(us for _, us in by_name.values())
    top = [{"name": k, "calls": n, "total_ms": us / 1000.0, "pct": 100.0 * us / total_us}
           for k, (n, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:TOP]]
    return {"gpu_busy_pct": min(100.0, 100.0 * _length(busy) / 1000.0 / steps / step_ms),
            "kernels_per_step": len(kernels) / steps,
            "median_kernel_us": float(np.median([b - a for a, b in kernels])),
            "h2d_exposed_ms": exposed_ms, "top": top}


def _cpu_top(prof) -> list[dict]:
    avgs = [a for a in prof.key_averages()
            if not a.key.startswith((OWN, "ProfilerStep")) and a.self_cpu_time_total > 0]
    total = sum(a.self_cpu_time_total for a in avgs) or 1.0
    avgs.sort(key=lambda a: -a.self_cpu_time_total)
    return [{"name": a.key, "calls": a.count, "total_ms": a.self_cpu_time_total / 1000.0,
             "pct": 100.0 * a.self_cpu_time_total / total} for a in avgs[:TOP]]


# ----------------------------------------------------------------------------------- profile
def profile(cfg, data, steps: int = 20, out: str | Path = "profile", say=print) -> dict:
    """Profile ``steps`` training steps; writes DIR/trace.json and DIR/report.html."""
    if steps < 1:
        raise UserError(f"--steps must be at least 1, got {steps}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rig = build_run(cfg, data)
    dev, acc, batches, step_fn = rig.device, cfg.train.grad_accum, rig.batches, rig.step_fn
    fps = cfg.audio.sample_rate / cfg.audio.hop_length
    cuda = dev.type == "cuda"
    name = device_name(dev)
    say(f"profiling {steps} steps on {dev} ({name}), precision {rig.precision.name}, compile "
        f"{rig.cfg.train.compile}, {len(rig.shapes)} bucket shapes, grad_accum {acc}")
    if not cuda:
        say("no GPU: every figure below is CPU time (host perf_counter), not GPU time")

    # 1. warm-up: start the loader, then one step per bucket shape.
    t0 = time.perf_counter()
    Loop(rig, StepTimer(dev)).step_once()
    warm_up(rig)
    warm_s = time.perf_counter() - t0
    graphs0 = compiled_graphs()
    say(f"warm-up: {len(rig.shapes)} shapes, one step each, {warm_s:.1f} s")

    # 2. timed pass: the trainer's own step, with phase marks hooked into it, and NVML sampled
    # beside it (not beside the profiled pass: the profiler's bookkeeping slows the host).
    loop, marks = Loop(rig, StepTimer(dev, frames_per_second=fps)), _Marks(dev)
    step_fn.hooks.append(marks)
    sampler, no_gpu = start_sampler(NVML_INTERVAL_S) if cuda else (None, "no GPU")
    host_ms, step_shapes, sample = 0.0, [], {}
    for _ in range(steps):
        marks.begin()
        micro = loop.step_once()
        marks.end()
        host_ms += loop.last_host_ms
        shapes = [tuple(m["mel"].shape) for m in micro]
        step_shapes.append(shapes)
        for s, m in zip(shapes, micro):
            sample.setdefault(s, m)
    summ = loop.timer.summary()
    gpu = stop_sampler(sampler)
    gpu_samples = sampler.samples() if sampler is not None else []
    phases = marks.phases_ms()
    step_ms = summ["step_ms"]

    # 3. profiled pass.
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    marks.steps = []
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            loop.step_once()
            prof.step()
        sync(dev)
    step_fn.hooks.remove(marks)
    mem_peak = torch.cuda.max_memory_reserved(dev) if cuda else None  # before the eager FLOP count
    trace = out / "trace.json"
    prof.export_chrome_trace(str(trace))
    dstats = _device_stats(prof, steps, step_ms) if cuda else {}
    top = dstats.pop("top", None) or _cpu_top(prof)
    del prof

    # 4. host syncs, recompiles, FLOPs.
    syncs, sync_note = None, "not measurable on CPU"
    if cuda:
        with count_host_syncs() as sc:
            for _ in range(2):
                loop.step_once()
        syncs, sync_note = (sc.count / 2 if sc.count is not None else None), sc.reason
    recompiles = compiled_graphs() - graphs0
    flops_of = {s: count_step_flops(rig.model, b, rig.precision) for s, b in sample.items()}
    sample.clear()
    flops = sum(flops_of[s] for shapes in step_shapes for s in shapes)
    m = mfu(flops, summ["wall_s"], name if cuda else None)
    if not cuda:
        m.update(mfu_pct=None, mfu_basis="no GPU: MFU is against a GPU's peak")

    wall = step_ms or 0.0
    h2d_ms = dstats.get("h2d_exposed_ms", 0.0)
    wait_ms = wall * (summ["data_wait_pct"] or 0.0) / 100.0
    rows = {"waiting for data": wait_ms, "host-to-device": h2d_ms, "forward": phases["forward"],
            "backward": phases["backward"], "optimizer": phases["optimizer"]}
    rows["other"] = max(0.0, wall - sum(rows.values()))
    pct = (lambda v: 100.0 * v / wall) if wall else (lambda v: None)
    breakdown = {k: {"ms": v, "pct": pct(v)} for k, v in rows.items()}

    bf16 = torch.cuda.is_bf16_supported() if cuda else None
    settings = Settings.from_config(rig.cfg, device=str(dev), device_name=name, bf16_supported=bf16,
                                    cpu_count=R.usable_cpus(), compile=step_fn.compile_mode)
    run = {**asdict(settings), **summ, "n_shapes": len(rig.shapes), "padding_pct": batches.padding_pct,
           "recompiles": recompiles, "host_syncs_per_step": syncs, "mfu_pct": m["mfu_pct"]}
    if cuda:
        run["h2d_pct"] = pct(h2d_ms)
        run["input_bound_pct"] = (summ["data_wait_pct"] or 0.0) + run["h2d_pct"]
        run["other_pct"] = max(0.0, 100.0 - run["input_bound_pct"] - (summ["compute_pct"] or 0.0))
        run["cpu_dispatch_pct"] = min(100.0, 100.0 * host_ms / steps / wall) if wall else None
        run["mem_peak_pct"] = 100.0 * mem_peak / torch.cuda.get_device_properties(dev).total_memory
        run.update(dstats)
        run.pop("h2d_exposed_ms", None)
    measured = measured_from_profile(run, gpu, {} if gpu else {"gpu": f"NVML not sampled: {no_gpu}"})
    diag = diagnose(measured)
    not_measured = {} if cuda else {"mfu": m["mfu_basis"]}
    from myxtts.observe.report import write_report
    report = write_report(out / "report.html", measured, diag, title="MyXTTS profile",
                          not_measured=not_measured, achieved_tflops=m["achieved_tflops"],
                          mfu_basis=m["mfu_basis"], gpu_samples=gpu_samples,
                          meta={"device": f"{dev} ({name})", "steps": steps, "precision": rig.precision.name,
                                "compile": step_fn.compile_mode, "trace": str(trace)})
    return {"device": str(dev), "device_name": name, "timing": summ["timing"] + ("" if cuda else " (CPU)"),
            "precision": rig.precision.name, "compile": rig.cfg.train.compile, "steps": steps,
            "warmup_s": warm_s, "step_ms": step_ms, "breakdown": breakdown,
            "top_kind": "kernels" if cuda else "cpu ops", "top": top,
            "gpu_busy_pct": run.get("gpu_busy_pct"), "kernels_per_step": run.get("kernels_per_step"),
            "median_kernel_us": run.get("median_kernel_us"), "cpu_dispatch_pct": run.get("cpu_dispatch_pct"),
            "recompiles": recompiles, "host_syncs_per_step": syncs, "host_syncs_note": sync_note,
            "flops_per_step": flops / steps, **m, "throughput": summ["throughput"],
            "gpu": gpu, "trace": str(trace), "report": str(report), "run": run, "diagnosis": diag.as_dict()}


# Keys of a profile's ``run`` record that are not diagnosis inputs, and those named differently.
RECORD_ONLY = {"wall_s", "timing"}
RENAMED = {"compute_pct": "step_pct"}


def measured_from_profile(run: dict, gpu: dict | None = None, not_measured: dict | None = None) -> Measured:
    """The diagnosis inputs of a profile's ``run`` record (as ``--json`` writes it), with the NVML
    summary sampled beside the timed pass. An unknown key is an error, not a figure dropped."""
    names = {f.name for f in fields(Settings)}
    unknown = set(run) - names - {f.name for f in fields(Measured)} - RECORD_ONLY - set(RENAMED)
    if unknown:
        raise ValueError(f"unknown keys in a profile record: {', '.join(sorted(unknown))}")
    figures = {RENAMED.get(k, k): v for k, v in run.items() if k not in names and k not in RECORD_ONLY}
    return Measured(settings=Settings(**{k: v for k, v in run.items() if k in names}), gpu=gpu,
                    not_measured=not_measured or {}, **figures)
