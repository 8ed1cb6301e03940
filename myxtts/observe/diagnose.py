"""Rules that turn a run's numbers into ranked findings, each naming the setting to change.

The reference system's diagnostic scripts printed a list of generic tips ("increase batch size",
"increase workers", "enable XLA") whatever they measured. Here every finding quotes the number
that triggered it and the threshold it crossed, and its action is one concrete ``key=value``
(a field of ``myxtts.config``) or one ``myxtts`` command.

Classification (design.md §5), first match wins:

* ``input-bound``   input-bound % >= 5 (moderately) or >= 20 (highly): the loop waits for batches.
* ``idle``          NVML utilisation mean < 5 % and the loop is not input-bound: nothing runs on
                    the GPU (wrong device, CPU-only torch, a hang).
* ``launch-bound``  input-bound % < 5 and GPU busy share < 80 %, where *GPU busy share* is the
                    kernel-busy time divided by step wall time from a profile (``gpu_busy_pct``)
                    or, without one, the NVML ``utilization.gpu`` mean (the same quantity, sampled
                    by the driver). Batches are ready and yet the GPU idles a fifth of the step or
                    more: the host is not issuing work fast enough (per-op Python dispatch, many
                    tiny kernels, host syncs, recompiles). Profile evidence that confirms it: CPU
                    dispatch share above the busy share, or a median kernel shorter than 20 µs.
* ``compute-bound`` input-bound % < 5 and GPU busy share >= 80 %: the GPU is the limit; MFU says
                    how well it is used.

Input: one flat dict; every key is optional and a rule whose inputs are missing stays silent.
    measurements  input_bound_pct, data_wait_pct, h2d_pct, compute_pct, other_pct, step_ms,
                  step_cov_pct, step_by_shape, steps    (StepTimer.summary())
                  gpu (GpuSampler.summary()) or gpu_util (list of % or stats dict), sm_active
                  gpu_busy_pct, kernels_per_step, median_kernel_us, cpu_dispatch_pct (profiler)
                  recompiles (after warm-up), n_shapes, host_syncs_per_step, padding_pct,
                  mfu_pct, mem_peak_pct, not_measured ({section: reason})
    settings      device, device_name, bf16_supported, num_workers, cpu_count, prefetch_factor,
                  pin_memory, on_the_fly, frame_budget, pad_multiple, max_buckets, compile,
                  precision, grad_accum, log_every    (settings_from_config(cfg, ...))
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field

from myxtts.observe.gpu import SLOWDOWN_REASONS
from myxtts.observe.stats import IDLE_MEAN_PCT, OSCILLATING_COV_PCT, summarize, thresholds_text

INPUT_BOUND_MODERATE_PCT = 5.0   # TF profiler input-pipeline analyser thresholds (design.md §5)
INPUT_BOUND_HIGH_PCT = 20.0
INPUT_BOUND_TARGET_PCT = 1.0
LAUNCH_BUSY_MAX_PCT = 80.0       # GPU busy share below this, with batches ready: launch-bound
SMALL_KERNEL_US = 20.0           # a median kernel this short is dominated by its launch cost
SM_UNDERFILL_PCT = 50.0          # GPM SM activity below this while NVML reads busy
PADDING_LOW_PCT, PADDING_HIGH_PCT = 10.0, 25.0
THROTTLE_PCT = 10.0              # share of samples with a slowdown reason active
OTHER_PCT = 10.0                 # wall time outside loader, copy and step
LOW_MFU_PCT = 30.0
WORKER_MARGIN = 1.25             # head-room when sizing loader workers

SEVERITIES = ("high", "medium", "low", "info")


@dataclass
class Finding:
    severity: str      # one of SEVERITIES
    title: str
    evidence: str      # the numbers and the threshold they crossed
    action: str        # the exact key=value or command to try
    rule: str = ""     # stable id, for tests and for grouping in reports
    impact: float = 0.0  # estimated share of step time at stake (%), ranks findings of one severity


@dataclass
class Diagnosis:
    bound: str         # input-bound | launch-bound | compute-bound | idle | cpu | unknown
    reason: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def top(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def as_dict(self) -> dict:
        return {"bound": self.bound, "reason": self.reason, "findings": [asdict(f) for f in self.findings]}

    def text(self) -> str:
        lines = [f"verdict: {self.bound} ({self.reason})"]
        for i, f in enumerate(self.findings, 1):
            lines += [f"{i}. [{f.severity}] {f.title}", f"   evidence: {f.evidence}", f"   action:   {f.action}"]
        return "\n".join(lines)


def settings_from_config(cfg, *, device: str = "", device_name: str = "", bf16_supported=None) -> dict:
    """The settings the rules read, from a ``myxtts.config.Config``."""
    d, t = cfg.data, cfg.train
    return {"device": device, "device_name": device_name, "bf16_supported": bf16_supported,
            "cpu_count": os.cpu_count() or 1, "num_workers": d.num_workers,
            "prefetch_factor": d.prefetch_factor, "pin_memory": d.pin_memory, "on_the_fly": d.on_the_fly,
            "frame_budget": d.frame_budget, "pad_multiple": d.pad_multiple, "max_buckets": d.max_buckets,
            "compile": t.compile, "precision": t.precision, "grad_accum": t.grad_accum,
            "log_every": t.log_every}


# ------------------------------------------------------------------------------ derived inputs
def _stats(v) -> dict | None:
    if v is None:
        return None
    if isinstance(v, dict):
        return v
    s = summarize(v)
    return s.as_dict() if s else None


def gpu_util(run: dict) -> dict | None:
    """NVML utilisation stats; with several GPUs the least busy one (it sets the pace in DDP)."""
    if run.get("gpu_util") is not None:
        return _stats(run["gpu_util"])
    gpus = [g for g in (run.get("gpu") or {}).get("gpus", []) if g.get("util")]
    return min((g["util"] for g in gpus), key=lambda u: u["mean"], default=None)


def sm_active(run: dict) -> dict | None:
    if run.get("sm_active") is not None:
        return _stats(run["sm_active"])
    gpus = [g for g in (run.get("gpu") or {}).get("gpus", []) if g.get("sm_active")]
    return min((g["sm_active"] for g in gpus), key=lambda u: u["mean"], default=None)


def gpu_busy(run: dict) -> tuple[float | None, str]:
    """GPU busy share of the step and where it came from (see the module doc)."""
    if run.get("gpu_busy_pct") is not None:
        return float(run["gpu_busy_pct"]), "profiled kernel time / step time"
    u = gpu_util(run)
    return (u["mean"], "NVML utilization.gpu mean") if u else (None, "")


def classify(run: dict) -> tuple[str, str]:
    if run.get("device") == "cpu":
        return "cpu", "training ran on the CPU"
    ib = run.get("input_bound_pct")
    if ib is not None and ib >= INPUT_BOUND_MODERATE_PCT:
        level = "highly" if ib >= INPUT_BOUND_HIGH_PCT else "moderately"
        return "input-bound", (f"{level}: waiting for batches {ib:.1f} % of wall time "
                               f"(>= {INPUT_BOUND_MODERATE_PCT:g} % moderate, >= {INPUT_BOUND_HIGH_PCT:g} % high)")
    u = gpu_util(run)
    if u and u["mean"] < IDLE_MEAN_PCT:
        return "idle", f"GPU utilisation mean {u['mean']:.1f} % (< {IDLE_MEAN_PCT:g} %)"
    busy, basis = gpu_busy(run)
    if busy is None:
        return "unknown", "GPU busy share not measured"
    ibs = f"input-bound {ib:.1f} %" if ib is not None else "input-bound % not measured"
    if busy < LAUNCH_BUSY_MAX_PCT:
        return "launch-bound", f"GPU busy {busy:.0f} % of the step ({basis}) < {LAUNCH_BUSY_MAX_PCT:g} %, {ibs}"
    return "compute-bound", f"GPU busy {busy:.0f} % of the step ({basis}) >= {LAUNCH_BUSY_MAX_PCT:g} %, {ibs}"


# ------------------------------------------------------------------------------------- rules
def _r_device(run, bound, why):
    if bound == "cpu":
        yield Finding("high", "Training runs on the CPU", why,
                      "install a CUDA build of torch and train on a GPU; `myxtts doctor` checks the setup",
                      "cpu", 100)
    elif bound == "idle":
        steps = f"; {run['steps']} training steps were timed meanwhile" if run.get("steps") else ""
        yield Finding("high", "The GPU is idle", why + steps,
                      "run `myxtts doctor`: a CPU-only torch or CUDA_VISIBLE_DEVICES pointing at another "
                      "GPU leaves this one idle", "idle", 100)


def _workers_needed(w: int, wait_pct: float, cpus: int) -> tuple[int, int]:
    """Workers to remove the wait, assuming loader throughput grows linearly with workers:
    a step then takes compute / (1 - wait share), so W / (1 - f) workers keep up (+25 %)."""
    need = 4 if w == 0 else math.ceil(w / max(1e-3, 1 - wait_pct / 100) * WORKER_MARGIN)
    return need, max(1, min(need, cpus - 1))


def _r_input(run, bound, why):
    ib = run.get("input_bound_pct")
    if ib is None or ib < INPUT_BOUND_MODERATE_PCT:
        return
    sev = "high" if ib >= INPUT_BOUND_HIGH_PCT else "medium"
    wait, h2d = run.get("data_wait_pct"), run.get("h2d_pct") or 0.0
    wait = ib - h2d if wait is None else wait
    w, cpus = run.get("num_workers"), run.get("cpu_count")
    ev = f"{why}; target < {INPUT_BOUND_TARGET_PCT:g} %"
    if h2d > wait:
        ev += f"; of which the host-to-device copy is {h2d:.1f} %"
        act = ("`data.pin_memory=true` (pageable memory makes the copy synchronous)"
               if run.get("pin_memory") is False else
               "`myxtts profile`: the copy is not overlapped with compute; check the device prefetcher")
        yield Finding(sev, "Input-bound: the host-to-device copy is not overlapped", ev, act, "input-h2d", ib)
        return
    if run.get("on_the_fly"):
        yield Finding(sev, "Input-bound: loaders decode raw audio on every epoch", ev,
                      "`myxtts prepare` once, then `data.on_the_fly=false` (workers only slice arrays)",
                      "input-onthefly", ib)
        return
    if w is not None and cpus:
        need, n = _workers_needed(w, wait, cpus)
        ev += f"; {w} loader workers on {cpus} CPUs"
        if n > w:
            cap = (f" (about {need} would be needed; with {cpus} CPUs the loader stays CPU-limited: "
                   f"check the cache is on local disk)" if need > n else "")
            ev += (f" (needed ~ {w} / (1 - {wait / 100:.2f}) x {WORKER_MARGIN:g} head-room, at most CPUs - 1)"
                   if w else " (loading in the training process itself)")
            yield Finding(sev, "Input-bound: too few loader workers", ev, f"`data.num_workers={n}`{cap}",
                          "input-workers", ib)
            return
    yield Finding(sev, "Input-bound: the loader cannot keep up", ev,
                  "`myxtts tune` (sizes workers and prefetch for this machine), then `myxtts profile` "
                  "to time the loader alone", "input-tune", ib)


def _r_recompiles(run, bound, why):
    n = run.get("recompiles")
    if not n:
        return
    mb = run.get("max_buckets")
    shapes = f", {run['n_shapes']} distinct batch shapes seen" if run.get("n_shapes") else ""
    act = (f"`data.max_buckets={max(1, mb // 2)}` (fewer shapes reach the compiled step); "
           if mb and mb > 1 else "") + "`TORCH_LOGS=recompiles myxtts profile` names each guard that failed"
    yield Finding("high" if n >= 3 else "medium", f"{n} recompiles after warm-up",
                  f"the compiled step recompiled {n} times after warm-up{shapes}; each costs seconds "
                  f"to minutes of idle GPU", act, "recompiles", min(100.0, 10.0 * n))


def _r_syncs(run, bound, why):
    n = run.get("host_syncs_per_step")
    if not n:
        return
    yield Finding("high" if n >= 5 else "medium", f"{n:g} host syncs per step",
                  f"{n:g} synchronising CUDA calls per training step (target 0): each drains the GPU queue",
                  "`myxtts profile` lists the synchronising ops (.item(), .cpu(), nonzero); move them to "
                  "logging steps", "syncs", min(100.0, 5.0 * n))


def _r_launch(run, bound, why):
    if bound != "launch-bound":
        return
    busy, _ = gpu_busy(run)
    ev = why
    k, med, disp = run.get("kernels_per_step"), run.get("median_kernel_us"), run.get("cpu_dispatch_pct")
    if k is not None:
        ev += f"; {k:,.0f} kernels per step"
    if med is not None:
        ev += f", median kernel {med:.1f} µs" + (f" (< {SMALL_KERNEL_US:g} µs: launch cost dominates)"
                                                if med < SMALL_KERNEL_US else "")
    if disp is not None:
        ev += f"; CPU-side op dispatch {disp:.0f} % of the step"
    mode = run.get("compile")
    if mode == "off":
        act = "`train.compile=default` (fuses the step into far fewer kernels)"
    elif mode == "default":
        act = "`train.compile=cudagraphs` (replays the whole step as one CUDA graph: one launch per step)"
    else:
        fb = run.get("frame_budget")
        act = (f"`data.frame_budget={2 * fb}` (more work per kernel launch; `myxtts tune` checks it fits)"
               if fb else "`myxtts tune` (a larger frame budget gives each kernel more work)")
    sev = "high" if busy < 50 else "medium"
    if run.get("recompiles") or run.get("host_syncs_per_step"):
        # Recompiles and syncs also leave the GPU waiting on the host; fix those before judging launches.
        ev += "; the recompiles/host syncs reported above stall the host too: re-measure after fixing them"
        sev = "medium"
    yield Finding(sev, "Launch-bound: the GPU waits for the host", ev, act, "launch", 100.0 - busy)


def _r_compute(run, bound, why):
    if bound != "compute-bound":
        return
    mfu, mem = run.get("mfu_pct"), run.get("mem_peak_pct")
    ev = why + (f"; MFU {mfu:.0f} %" if mfu is not None else "; MFU not measured")
    if mfu is not None and mfu < LOW_MFU_PCT and run.get("compile") not in ("max-autotune", None):
        act, sev = "`train.compile=max-autotune` (autotuned kernels for the fixed shapes)", "low"
    elif mem is not None and mem < 60:
        act, sev = f"`myxtts tune` (peak memory {mem:.0f} %: a larger data.frame_budget fits)", "info"
    else:
        act, sev = "nothing to fix in the input pipeline; the GPU itself is the limit", "info"
    yield Finding(sev, "Compute-bound: the GPU is the bottleneck", ev, act, "compute", 0.0)


def _r_underfill(run, bound, why):
    u, sm = gpu_util(run), sm_active(run)
    if not (u and sm) or u["mean"] < LAUNCH_BUSY_MAX_PCT or sm["mean"] >= SM_UNDERFILL_PCT:
        return
    fb = run.get("frame_budget")
    yield Finding("medium", "Kernels fill few SMs",
                  f"NVML reads {u['mean']:.0f} % busy but GPM shows {sm['mean']:.0f} % of SMs active "
                  f"(< {SM_UNDERFILL_PCT:g} %): kernels are too small for this GPU",
                  f"`data.frame_budget={2 * fb}`" if fb else "`myxtts tune`", "underfill",
                  100.0 - sm["mean"])


def _r_oscillation(run, bound, why):
    u = gpu_util(run)
    if u and u.get("verdict") == "oscillating":
        first = next(iter(_r_input(run, bound, why)), None) or next(iter(_r_recompiles(run, bound, why)), None)
        cause = (first.action if first else
                 "`myxtts profile` over the dips (host syncs, eval or checkpoint pauses)")
        yield Finding("medium", "GPU utilisation oscillates",
                      f"NVML utilization mean {u['mean']:.0f} %, p5 {u['p5']:.0f} %, CoV {u['cov_pct']:.0f} % "
                      f"({thresholds_text()})", cause, "oscillation", u["std"])
    worst = max(((k, v) for k, v in (run.get("step_by_shape") or {}).items() if v.get("n", 0) >= 5),
                key=lambda kv: kv[1]["cov_pct"], default=None)
    if worst and worst[1]["cov_pct"] > OSCILLATING_COV_PCT:
        k, v = worst
        yield Finding("medium", f"Step time varies within shape {k}",
                      f"CoV {v['cov_pct']:.0f} % over {v['n']} steps of one shape (> {OSCILLATING_COV_PCT:g} %); "
                      f"same shape, different time means host syncs, GC pauses, recompiles or throttling",
                      "`myxtts profile`", "step-cov", v["cov_pct"] / 2)


def _r_padding(run, bound, why):
    p = run.get("padding_pct")
    if p is None or p < PADDING_LOW_PCT:
        return
    pm, mb = run.get("pad_multiple"), run.get("max_buckets")
    if pm and pm > 16:
        act = f"`data.pad_multiple={pm // 2}` (finer bucket lengths; more shapes to compile once)"
    elif mb:
        act = f"`data.max_buckets={min(64, mb * 2)}` (more buckets; more shapes to compile once)"
    else:
        act = "`data.pad_multiple` smaller or `data.max_buckets` larger"
    yield Finding("medium" if p >= PADDING_HIGH_PCT else "low", f"{p:.0f} % of computed frames are padding",
                  f"padding waste {p:.1f} % (>= {PADDING_LOW_PCT:g} %): that share of the GPU's work is thrown away",
                  act, "padding", p)


def _r_settings(run, bound, why):
    if str(run.get("device") or "").startswith("cuda") or run.get("gpu"):
        prec, bf16 = run.get("precision"), run.get("bf16_supported")
        if prec == "fp32":
            yield Finding("medium", "Training in fp32", "train.precision=fp32 on a GPU with tensor cores",
                          f"`train.precision={'fp16' if bf16 is False else 'bf16'}`", "precision", 30)
        elif prec == "fp16" and bf16:
            yield Finding("low", "fp16 where bf16 is available",
                          "fp16 needs loss scaling and skips steps on overflow; this GPU supports bf16",
                          "`train.precision=bf16`", "precision", 5)
        if run.get("compile") == "off" and bound != "launch-bound":
            yield Finding("medium", "The step runs eagerly", "train.compile=off: every op is a separate launch",
                          "`train.compile=default`", "compile", 20)
    w, cpus = run.get("num_workers"), run.get("cpu_count")
    if w is not None and cpus and w > cpus - 1 and cpus > 1:
        yield Finding("low", "More loader workers than spare CPUs",
                      f"{w} workers on {cpus} CPUs: they compete with the training process",
                      f"`data.num_workers={cpus - 1}`", "workers-oversubscribed", 2)
    gpus = (run.get("gpu") or {}).get("gpus", [])
    for g in gpus:
        slow = {r: p for r, p in g.get("throttle_pct", {}).items() if r in SLOWDOWN_REASONS and p >= THROTTLE_PCT}
        if slow:
            top = ", ".join(f"{r} {p:.0f} % of samples" for r, p in sorted(slow.items(), key=lambda x: -x[1]))
            yield Finding("medium", f"GPU {g['index']} clocks are lowered", top,
                          "not a MyXTTS setting: check cooling and the power limit (`nvidia-smi -q -d PERFORMANCE`)",
                          "throttle", max(slow.values()) / 2)
    other = run.get("other_pct")
    if other is not None and other >= OTHER_PCT:
        le = run.get("log_every")
        act = f"`train.log_every={le * 4}`" if le and le < 50 else "`myxtts profile` (time between steps)"
        yield Finding("medium", "Host time between steps",
                      f"{other:.0f} % of wall time is outside the loader, the copy and the step (>= {OTHER_PCT:g} %): "
                      f"logging, validation, checkpoints or Python between steps", act, "other", other)


def _r_unmeasured(run, bound, why):
    if gpu_util(run) is None and run.get("device") != "cpu":
        reason = (run.get("not_measured") or {}).get("gpu", "no GPU samples were given")
        yield Finding("info", "GPU utilisation not measured", reason,
                      "install nvidia-ml-py (`pip install 'myxtts[gpu]'`) and run on an NVIDIA GPU",
                      "unmeasured", 0)


RULES = [_r_device, _r_input, _r_recompiles, _r_syncs, _r_launch, _r_underfill, _r_oscillation,
         _r_padding, _r_settings, _r_compute, _r_unmeasured]


def diagnose(run: dict) -> Diagnosis:
    """Classify the run and return its findings, most severe and most costly first."""
    bound, why = classify(run)
    found = [f for rule in RULES for f in rule(run, bound, why)]
    found.sort(key=lambda f: (SEVERITIES.index(f.severity), -f.impact))
    return Diagnosis(bound, why, found)
