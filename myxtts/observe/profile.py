"""``myxtts profile``: where a training step's time goes, measured, with the setting to change.

What it runs, on a run assembled by ``train.build`` with its own batch stream:

1. ``observe.measure``: every shape compiled, a warm-up, then N timed steps of the trainer's own
   loop (``StepTimer``: data wait, CUDA-event step time and its forward / backward / optimizer
   phases), with NVML sampled beside them. This pass runs *without* the profiler, whose per-op
   bookkeeping would inflate host time and make any run look launch-bound;
2. profiled pass, N steps under ``torch.profiler`` (CPU + CUDA activities): the top kernels (top
   CPU ops on the CPU), kernels per step, median kernel time, GPU busy share (union of kernel
   intervals ÷ step time of pass 1), the host-to-device copy not hidden behind kernels, and a
   Chrome trace (``DIR/trace.json``, open it in https://ui.perfetto.dev);
3. host syncs per step (``count_host_syncs``, CUDA only), recompiles after warm-up, MFU (FLOPs
   of each batch shape counted by observe.flops), then ``diagnose`` classifies the run
   input-bound / launch-bound / compute-bound (thresholds in docs/design.md).
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, record_function

from myxtts.errors import UserError
from myxtts.observe.diagnose import diagnose
from myxtts.observe.gpu import start_sampler, stop_sampler
from myxtts.observe.gpu_summary import GpuSummary
from myxtts.observe.measure import measure
from myxtts.observe.measured import Measured, Settings
from myxtts.observe.ops import count_host_syncs
from myxtts.rundir import RunDir
from myxtts.train.build import build_run
from myxtts.train.compile import compiled_graphs
from myxtts.train.loop import Loop
from myxtts.train.memory import read_memory
from myxtts.train.precision import device_name, sync, usable_cpus

PHASES = ("waiting for data", "host-to-device", "forward", "backward", "optimizer", "other")
TOP = 12
NVML_INTERVAL_S = 0.2  # a timed pass lasts seconds: sample often enough for a mean
OWN = "myxtts/"  # prefix of this module's record_function ranges


class _Ranges:
    """``TrainStep`` hook: each phase of the step as a profiler range named ``OWN + phase``, so
    the trace shows where forward, backward and optimizer begin and end."""

    def __init__(self):
        self._open = None

    def phase(self, name: str) -> None:
        self.close()
        self._open = record_function(OWN + name)
        self._open.__enter__()

    def close(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None


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
    run = build_run(cfg, data)
    dev, step_fn = run.device, run.step_fn
    cuda = dev.type == "cuda"
    name = device_name(dev)
    say(f"profiling {steps} steps on {dev} ({name}), precision {run.precision.name}, compile "
        f"{step_fn.compile_mode}, {len(run.shapes)} bucket shapes, grad_accum {cfg.train.grad_accum}")
    if not cuda:
        say("no GPU: every figure below is CPU time (host perf_counter), not GPU time")

    # 1. compile, warm up and time the trainer's own steps, NVML sampled beside the timed ones
    summ, nvml = _measured(run, steps)
    say(f"warm-up: {len(run.shapes)} shapes, {summ['warmup_passes']} pass(es), {summ['warmup_s']:.1f} s")
    gpu, step_ms = nvml["summary"], summ["step_ms"]
    graphs0 = compiled_graphs()
    # 2. profiled pass, then 3. host syncs and recompiles
    loop = Loop(run)
    trace, dstats, top, mem = _profiled(run, loop, steps, out / "trace.json", step_ms)
    syncs, sync_note = _host_syncs(loop, cuda)
    recompiles = summ["recompiles_after_warmup"] + compiled_graphs() - graphs0
    m = {k: summ[k] for k in ("achieved_tflops", "peak_tflops", "mfu_pct", "mfu_basis")}
    if not cuda:
        m.update(mfu_pct=None, mfu_basis="no GPU: MFU is against a GPU's peak")

    h2d_ms = dstats.pop("h2d_exposed_ms", 0.0)
    breakdown = _breakdown(summ, h2d_ms)
    record = _record(run, summ, dstats, h2d_ms, mem,
                     {"recompiles": recompiles, "host_syncs_per_step": syncs, "mfu_pct": m["mfu_pct"]})
    measured = measured_from_profile(record, gpu, {} if gpu else {"gpu": f"NVML not sampled: {nvml['why']}"})
    diag = diagnose(measured)
    from myxtts.observe.report import write_report
    report = write_report(RunDir(out).report, measured, diag, title="MyXTTS profile",
                          not_measured={} if cuda else {"mfu": m["mfu_basis"]},
                          achieved_tflops=m["achieved_tflops"], mfu_basis=m["mfu_basis"],
                          gpu_samples=nvml["sampler"].samples() if nvml["sampler"] is not None else [],
                          meta={"device": f"{dev} ({name})", "steps": steps, "precision": run.precision.name,
                                "compile": step_fn.compile_mode, "trace": str(trace)})
    run.close()
    return {"device": str(dev), "device_name": name, "timing": summ["timing"] + ("" if cuda else " (CPU)"),
            "precision": run.precision.name, "compile": step_fn.compile_mode, "steps": steps,
            "warmup_s": summ["warmup_s"], "step_ms": step_ms, "breakdown": breakdown,
            "top_kind": "kernels" if cuda else "cpu ops", "top": top,
            "gpu_busy_pct": record.get("gpu_busy_pct"), "kernels_per_step": record.get("kernels_per_step"),
            "median_kernel_us": record.get("median_kernel_us"), "cpu_dispatch_pct": record.get("cpu_dispatch_pct"),
            "recompiles": recompiles, "host_syncs_per_step": syncs, "host_syncs_note": sync_note,
            "flops_per_step": summ["flops"] / max(summ["steps"], 1), **m, "throughput": summ["throughput"],
            "gpu": gpu.as_dict() if gpu else None, "trace": str(trace), "report": str(report), "run": record,
            "diagnosis": diag.as_dict()}


def _measured(run, steps: int) -> tuple[dict, dict]:
    """``measure`` of the run's own batches with NVML sampled beside the timed steps (not beside
    the profiled pass: the profiler's bookkeeping slows the host) → (its figures, {"sampler",
    "why" it is None, "summary"})."""
    cuda = run.device.type == "cuda"
    nvml: dict = {}

    @contextlib.contextmanager
    def sampled():
        nvml["sampler"], nvml["why"] = start_sampler(NVML_INTERVAL_S) if cuda else (None, "no GPU")
        try:
            yield
        finally:
            nvml["summary"] = stop_sampler(nvml["sampler"])

    return measure(run, steps, batches=run.batches, beside=sampled, flops=True), nvml


def _profiled(run, loop: Loop, steps: int, trace: Path, step_ms: float):
    """``steps`` steps under torch.profiler, each phase a range, the Chrome trace written to
    ``trace`` → (trace, kernel statistics (CUDA; else {}), top kernels or CPU ops, memory)."""
    dev, cuda = run.device, run.device.type == "cuda"
    ranges = _Ranges()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    run.step_fn.hooks.append(ranges)
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            loop.step_once()
            ranges.close()
            prof.step()
        sync(dev)
    run.step_fn.hooks.remove(ranges)
    mem = read_memory(dev)  # since measure() started: its steps and the profiled pass
    prof.export_chrome_trace(str(trace))
    dstats = _device_stats(prof, steps, step_ms) if cuda else {}
    top = dstats.pop("top", None) or _cpu_top(prof)
    return trace, dstats, top, mem


def _host_syncs(loop: Loop, cuda: bool) -> tuple[float | None, str]:
    """Host syncs per step over two steps (CUDA only) → (syncs, why None)."""
    if not cuda:
        return None, "not measurable on CPU"
    with count_host_syncs() as sc:
        for _ in range(2):
            loop.step_once()
    return (sc.count / 2 if sc.count is not None else None), sc.reason


def _breakdown(summ: dict, h2d_ms: float) -> dict:
    """Where a step's time goes, {phase: {"ms", "pct"}} over ``PHASES``."""
    wall = summ["step_ms"] or 0.0
    phases = summ["phase_ms"]
    rows = {"waiting for data": wall * (summ["input_bound_pct"] or 0.0) / 100.0, "host-to-device": h2d_ms,
            **{p: phases.get(p, 0.0) for p in ("forward", "backward", "optimizer")}}
    rows["other"] = max(0.0, wall - sum(rows.values()))
    return {k: {"ms": v, "pct": 100.0 * v / wall if wall else None} for k, v in rows.items()}


def _record(run, summ: dict, dstats: dict, h2d_ms: float, mem, figures: dict) -> dict:
    """The profile's ``run`` record: the run's settings, the timed steps' figures, ``figures``,
    and on a GPU the exposed copy, CPU dispatch, memory and kernel statistics."""
    dev, wall = run.device, summ["step_ms"] or 0.0
    cuda = dev.type == "cuda"
    settings = Settings.from_config(run.cfg, device=str(dev), device_name=device_name(dev),
                                    bf16_supported=torch.cuda.is_bf16_supported() if cuda else None,
                                    cpu_count=usable_cpus(), compile=run.step_fn.compile_mode)
    record = {**asdict(settings), **{k: summ[k] for k in RUN_FIGURES}, "n_shapes": len(run.shapes),
              "padding_pct": run.batches.padding_pct, **figures}
    if cuda:
        record["h2d_pct"] = 100.0 * h2d_ms / wall if wall else None
        record["input_bound_pct"] = (summ["input_bound_pct"] or 0.0) + record["h2d_pct"]
        record["other_pct"] = max(0.0, 100.0 - record["input_bound_pct"] - (summ["compute_pct"] or 0.0))
        record["cpu_dispatch_pct"] = min(100.0, 100.0 * summ["host_ms_per_step"] / wall) if wall else None
        record["mem_peak_pct"] = mem.reserved_peak_pct if mem else None
        record.update(dstats)
    return record


# The figures of ``StepTimer.summary()`` a profile's ``run`` record keeps.
RUN_FIGURES = ("steps", "wall_s", "step_ms", "step_cov_pct", "input_bound_pct", "compute_pct", "other_pct",
               "step_by_shape", "throughput", "timing")


# Keys of a profile's ``run`` record that are not diagnosis inputs, and those named differently.
# Records written before input-bound % had one name also hold ``data_wait_pct``: the loop's own
# wait, which ``Measured.data_wait_pct`` now derives from input-bound % and the exposed copy.
RECORD_ONLY = {"wall_s", "timing", "data_wait_pct"}
RENAMED = {"compute_pct": "step_pct"}


def measured_from_profile(run: dict, gpu: GpuSummary | None = None, not_measured: dict | None = None) -> Measured:
    """The diagnosis inputs of a profile's ``run`` record (as ``--json`` writes it), with the NVML
    summary sampled beside the timed pass. An unknown key is an error, not a figure dropped."""
    names = {f.name for f in fields(Settings)}
    unknown = set(run) - names - {f.name for f in fields(Measured)} - RECORD_ONLY - set(RENAMED)
    if unknown:
        raise ValueError(f"unknown keys in a profile record: {', '.join(sorted(unknown))}")
    figures = {RENAMED.get(k, k): v for k, v in run.items() if k not in names and k not in RECORD_ONLY}
    return Measured(settings=Settings(**{k: v for k, v in run.items() if k in names}), gpu=gpu,
                    not_measured=not_measured or {}, **figures)
