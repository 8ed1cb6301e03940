"""Rules that turn a run's figures (``observe.measured.Measured``) into a verdict and ranked
findings, each naming the setting to change.

Every finding quotes the number that triggered it and the threshold it crossed, and its action is
one concrete ``key=value`` (a field of ``myxtts.config``) or one ``myxtts`` command: a list of
generic tips ("increase batch size", "add workers") whatever was measured helps nobody.

The verdicts and the order ``classify`` checks them in (first match wins) are those of
docs/design.md, "Diagnosis"; the thresholds are the constants below, and those of the input
pipeline's rules in ``observe.input_rules``.
"""
from __future__ import annotations

from myxtts.config import MIN_FRAME_BUDGET
from myxtts.observe.efficiency import (
    SHAPE_MIN_STEPS,
    busy_verdict,
    flat_text,
    kernel_findings,
    mfu_flat,
    throttle_findings,
)
from myxtts.observe.findings import Diagnosis, Finding, ranked
from myxtts.observe.format import fmt
from myxtts.observe.input_rules import INPUT_BOUND_HIGH_PCT, INPUT_BOUND_MODERATE_PCT, input_findings, padding_findings
from myxtts.observe.measured import Measured
from myxtts.observe.ranks import straggler_findings
from myxtts.observe.stats import IDLE_MEAN_PCT, OSCILLATING_COV_PCT, series_text, thresholds_text
from myxtts.train.sizing import HEADROOM

LAUNCH_BUSY_MAX_PCT = 80.0       # GPU busy share below this, with batches ready: launch-bound
HALF_BUSY_PCT = 50.0             # below this a launch-bound GPU idles most of the time: high severity
SMALL_KERNEL_US = 20.0           # a median kernel this short is dominated by its launch cost
HOST_DISPATCH_BOUND_PCT = 90.0   # host busy launching this share of the step: it cannot launch faster
SM_UNDERFILL_PCT = 50.0          # GPM SM activity below this while NVML reads busy
OTHER_PCT = 10.0                 # wall time outside loader, copy and step
LOW_MFU_PCT = 30.0               # MFU below this is drawn as low in the report
RECOMPILES_HIGH = 3              # this many recompiles after warm-up: high severity
SYNCS_HIGH = 5                   # host syncs per step: high severity
SYNCS_STALL = 1                  # host syncs per step that stall the host enough to blur other verdicts
MEMORY_LOW_PCT = 25.0            # peak GPU memory below this: the frame budget leaves the GPU empty
MEMORY_ROOM_PCT = 60.0           # a compute-bound run below this has room for a larger budget
MEMORY_FILL_PCT = 100.0 * HEADROOM  # the peak memory automatic sizing and `myxtts tune` fill a GPU to
BUDGET_STEP = MIN_FRAME_BUDGET         # frame budgets are rounded down to this (the config's minimum)
BUDGET_GAIN = 1.25               # a larger budget is suggested only when it is this much larger

def budget_to_fill(m: Measured) -> int | None:
    """The frame budget that would fill the GPU to MEMORY_FILL_PCT, from the peak memory at the
    current budget, assuming memory grows in proportion to the frames of a batch. The weights
    and optimizer state do not grow, so the estimate errs on the side of fitting; ``myxtts tune``
    measures the real figure."""
    fb, mem = m.settings.frame_budget, m.mem_peak_pct
    if not fb or not mem or mem <= 0:
        return None
    return int(fb * MEMORY_FILL_PCT / mem) // BUDGET_STEP * BUDGET_STEP


def _more_budget(m: Measured) -> str | None:
    """``data.frame_budget=N`` with why, when the GPU has memory to spare for it and MFU is not
    flat across the batch shapes (where it is, larger batches do not make the kernels better)."""
    if mfu_flat(m):
        return None
    fill = budget_to_fill(m)
    if fill is None or fill < BUDGET_GAIN * m.settings.frame_budget:
        return None
    return (f"`data.frame_budget={fill}` (peak memory {m.mem_peak_pct:.0f} % of the GPU at "
            f"{m.settings.frame_budget}, scaled to fill the {MEMORY_FILL_PCT:g} % `myxtts tune` aims for; "
            "tune measures it)")


# ------------------------------------------------------------------------------ classification
def _launch_signature(m: Measured) -> bool:
    med, disp = m.median_kernel_us, m.cpu_dispatch_pct
    return med is not None and disp is not None and med < SMALL_KERNEL_US and disp >= HOST_DISPATCH_BOUND_PCT


def classify(m: Measured) -> tuple[str, str]:
    s = m.settings
    if s.device == "cpu":
        return "cpu", "training ran on the CPU"
    ib = m.input_bound_pct
    if ib is not None and ib >= INPUT_BOUND_MODERATE_PCT:
        level = "highly" if ib >= INPUT_BOUND_HIGH_PCT else "moderately"
        return "input-bound", (f"{level}: the loop waits for batches {ib:.1f} % of the time "
                               f"(>= {INPUT_BOUND_MODERATE_PCT:g} % moderate, >= {INPUT_BOUND_HIGH_PCT:g} % high)")
    if m.only_compiled():
        shapes = f" {m.n_shapes} batch shapes" if m.n_shapes else ""
        return "compiling", (f"the run spent {m.compile_s:.0f} s compiling{shapes} and no step ran after "
                             "the warm-up: the GPU waited for the compiler, it was not idle")
    u = m.util()
    if u and u.mean < IDLE_MEAN_PCT:
        return "idle", f"GPU utilisation mean {u.mean:.1f} % (< {IDLE_MEAN_PCT:g} %)"
    busy = m.busy()
    ibs = f"the loop waits on data {ib:.1f} % of the time" if ib is not None else "input-bound % not measured"
    kernels = "its kernels"
    if m.kernels_per_step is not None:
        med = f" (median {m.median_kernel_us:.1f} µs)" if m.median_kernel_us is not None else ""
        kernels = f"{m.kernels_per_step:,.0f} small kernels a step{med}"
    busy_host = f"the host spends {fmt(m.cpu_dispatch_pct, '{:.0f}')} % of the step launching {kernels}"
    if busy is None:
        if _launch_signature(m):
            return "launch-bound", f"{busy_host}; {ibs}"
        return "unknown", "GPU busy share not measured"
    level = f"the GPU is busy {busy.pct:.0f} % of the time ({busy.basis})"
    if busy.pct < LAUNCH_BUSY_MAX_PCT:
        return "launch-bound", f"{level}, waiting for the host to launch {kernels}; {ibs}"
    if _launch_signature(m):
        return "launch-bound", f"{level}, but {busy_host}: it cannot issue work any faster; {ibs}"
    return busy_verdict(m, f"{level} (>= {LAUNCH_BUSY_MAX_PCT:g} %) and {ibs}")


# ------------------------------------------------------------------------------------- rules
def _r_device(m, bound, why):
    if bound == "cpu":
        yield Finding("high", "Training runs on the CPU", why,
                      "install a CUDA build of torch and train on a GPU; `myxtts doctor` checks the setup",
                      "cpu", 100)
    elif bound == "idle":
        steps = f"; {m.steps} training steps were timed meanwhile" if m.steps else ""
        yield Finding("high", "The GPU is idle", why + steps,
                      "run `myxtts doctor`: a CPU-only torch or CUDA_VISIBLE_DEVICES pointing at another "
                      "GPU leaves this one idle", "idle", 100)


def _r_compiling(m, bound, why):
    if bound != "compiling":
        return
    yield Finding("medium", "The run only compiled", f"{m.compile_s:.0f} s went to compiling the step and no "
                  "step ran after it; GPU samples taken meanwhile count as compiling, not idle",
                  "a larger `train.time_budget_s`, so the run gets past its warm-up (compiled kernels are "
                  "cached: the next run on these shapes loads them), or a smaller `data.max_buckets` (fewer "
                  "shapes to compile)", "compiling", 50)


def _r_idle_gpus(m, bound, why):
    idle, busy = m.idle_gpus()
    if not idle:
        return
    names = ", ".join(f"GPU {g.index} {g.util.mean:.0f} %" for g in idle)
    works = ", ".join(f"GPU {g.index} {g.util.mean:.0f} %" for g in busy)
    n = len(idle) + len(busy)
    yield Finding("high", "Some GPUs sit idle while others train",
                  f"utilisation mean {names} (< {IDLE_MEAN_PCT:g} %) while {works}: a GPU that only feeds "
                  "data or waits does no training", f"`torchrun --nproc_per_node={n} -m myxtts train ...` "
                  "(DDP: every GPU trains on its own share of the batches)", "idle-gpus",
                  100.0 * len(idle) / n)


def _r_recompiles(m, bound, why):
    n, mb = m.recompiles, m.settings.max_buckets
    if m.cudagraph_skips:  # the step then ran without a graph and reads as launch-bound
        yield Finding("high", "CUDA graphs were skipped", f"torch skipped {m.cudagraph_skips} CUDA graph(s): "
                      "those steps launched every kernel from the host", "`TORCH_LOGS=cudagraphs myxtts train ...` "
                      "says why (a CPU tensor or a host copy inside the step, a mutated input)", "cudagraph-skips", 80)
    if m.graphs_compiled and m.graphs_compiled > 1 and m.settings.compile in ("default", "cudagraphs"):
        # Warm-up, not training: each graph costs its compile once (cached after), no step time.
        yield Finding("low", f"The step compiled {m.graphs_compiled} times before step 1",
                      f"{m.graphs_compiled} graphs for {m.n_shapes or 'its'} shapes where one serves all: a guard "
                      "fixed a size, and each such shape cost a compile before training (no step time)",
                      "none for step time; the compiled kernels are kept (`train.compile_cache`), so a "
                      "resumed or second run on the same shapes loads them instead of compiling again",
                      "compiled-apart", 0.0)
    if not n:
        return
    shapes = f", {m.n_shapes} distinct batch shapes seen" if m.n_shapes else ""
    act = (f"`data.max_buckets={max(1, mb // 2)}` (fewer shapes reach the compiled step); "
           if mb and mb > 1 else "") + "`TORCH_LOGS=recompiles myxtts profile` names each guard that failed"
    yield Finding("high" if n >= RECOMPILES_HIGH else "medium", f"{n} recompiles after warm-up",
                  f"the compiled step recompiled {n} times after warm-up{shapes}; each costs seconds "
                  f"to minutes of idle GPU", act, "recompiles", min(100.0, 10.0 * n))


def _r_syncs(m, bound, why):
    n = m.host_syncs_per_step
    if not n:
        return
    yield Finding("high" if n >= SYNCS_HIGH else "medium", f"{n:g} host syncs per step",
                  f"{n:g} synchronising CUDA calls per training step (target 0): each drains the GPU queue",
                  "`myxtts profile` lists the synchronising ops (.item(), .cpu(), nonzero); move them to "
                  "logging steps", "syncs", min(100.0, 5.0 * n))


def launch_action(m: Measured) -> str:
    """The fixes MyXTTS has for a launch-bound step: CUDA graphs (one launch per step), a
    larger frame budget (more work per launch), or both."""
    s = m.settings
    fixes = []
    if s.compile in ("off", "default", "regional", None) and s.world_size == 1:
        fixes.append("`train.compile=cudagraphs` (the whole step replays as one CUDA graph: one launch "
                     "instead of one per kernel; the default `train.compile=auto` does this on a CUDA GPU)")
    elif s.compile == "off":
        fixes.append("`train.compile=default` (inductor fuses the step into far fewer kernels; CUDA graphs "
                     "cannot be captured around DDP's gradient all-reduce)")
    more = _more_budget(m)
    if more:
        fixes.append(more)
    if not fixes:
        fb = s.frame_budget
        fixes.append(f"`myxtts tune` (a larger data.frame_budget than {fb} gives each kernel more work)"
                     if fb else "`myxtts tune` (a larger frame budget gives each kernel more work)")
    return " and ".join(fixes)


def _r_launch(m, bound, why):
    if bound != "launch-bound":
        return
    busy = m.busy()
    ev = why
    if m.median_kernel_us is not None and m.median_kernel_us < SMALL_KERNEL_US:
        ev += f"; kernels under {SMALL_KERNEL_US:g} µs cost about as much to launch as to run"
    if busy and busy.note:
        ev += f"; {busy.note}"
    pct = busy.pct if busy else None
    sev = "high" if pct is not None and pct < HALF_BUSY_PCT else "medium"
    if m.recompiles or (m.host_syncs_per_step or 0) >= SYNCS_STALL:
        # Recompiles and syncs also leave the GPU waiting on the host; fix those before judging launches.
        ev += "; the recompiles/host syncs reported above stall the host too: re-measure after fixing them"
        sev = "medium"
    yield Finding(sev, "Launch-bound: the GPU waits for the host", ev, launch_action(m), "launch",
                  50.0 if pct is None else 100.0 - pct)


def _r_compute(m, bound, why):
    if bound != "compute-bound":
        return
    mem = m.mem_peak_pct
    ev = why
    if mfu_flat(m):
        act = flat_text(m) + "; the kernels themselves are the limit (`myxtts profile`)"
    elif mem is not None and mem < MEMORY_ROOM_PCT:
        act = _more_budget(m) or f"`myxtts tune` (peak memory {mem:.0f} %: a larger data.frame_budget fits)"
    else:
        act = "nothing to fix in the input pipeline; the GPU itself is the limit"
    yield Finding("info", "Compute-bound: the GPU is the bottleneck", ev, act, "compute", 0.0)


def _r_memory(m, bound, why):
    """A frame budget that leaves most of the GPU's memory unused (launch-bound runs get the
    larger budget in the launch finding's action; where MFU is flat across shapes, larger
    batches would not help)."""
    if not m.settings.on_gpu or bound == "launch-bound" or m.mem_peak_pct is None or mfu_flat(m):
        return
    if m.mem_peak_pct >= MEMORY_LOW_PCT:
        return
    act = _more_budget(m) or "`myxtts tune` (finds the largest data.frame_budget that fits)"
    yield Finding("medium", "The frame budget leaves most of the GPU's memory unused",
                  f"peak memory {m.mem_peak_pct:.0f} % of the GPU at data.frame_budget={m.settings.frame_budget} "
                  f"(< {MEMORY_LOW_PCT:g} %): small batches give each kernel little work", act, "memory",
                  MEMORY_LOW_PCT - m.mem_peak_pct)


def _r_underfill(m, bound, why):
    u, sm = m.util(), m.sm()
    if not (u and sm) or u.mean < LAUNCH_BUSY_MAX_PCT or sm.mean >= SM_UNDERFILL_PCT:
        return
    fb = m.settings.frame_budget
    yield Finding("medium", "Kernels fill few SMs",
                  f"NVML reads {u.mean:.0f} % busy but GPM shows {sm.mean:.0f} % of SMs active "
                  f"(< {SM_UNDERFILL_PCT:g} %): kernels are too small for this GPU",
                  _more_budget(m) or (f"`data.frame_budget={2 * fb}`" if fb else "`myxtts tune`"), "underfill",
                  100.0 - sm.mean)


# Findings of what pauses the GPU while it trains: input waits, recompiles after warm-up, host
# syncs, host time between steps (validation, checkpoints). A compile before step 1 is none.
DIP_CAUSES = ("input-h2d", "input-onthefly", "input-workers", "input-tune", "recompiles", "syncs", "other")


def _r_oscillation(m, bound, why):
    u = m.util()
    if u and u.verdict == "oscillating" and bound != "compiling":
        seen = (f for rule in (input_findings, _r_recompiles, _r_syncs, _r_settings) for f in rule(m, bound, why))
        first = next((f for f in seen if f.rule in DIP_CAUSES), None)
        ev = f"NVML utilization {series_text(u)} ({thresholds_text()})"
        sev = "medium"
        if first:
            ev += f"; seen while training: {first.title.lower()}"
            act = first.action
        else:  # nothing to borrow: say what was ruled out, and rank below what was found
            sev = "low"
            ev += (f"; no cause seen while training (input-bound {fmt(m.input_bound_pct)} %, "
                   f"{fmt(m.recompiles, '{}')} recompiles after warm-up, host syncs per step "
                   f"{fmt(m.host_syncs_per_step, '{:g}')}, time between steps {fmt(m.other_pct)} %)")
            act = "`myxtts profile` over the dips: the cause is not in this run's figures"
        yield Finding(sev, "GPU utilisation oscillates", ev, act, "oscillation", u.std)
    worst = max(((k, v) for k, v in m.step_by_shape.items() if v.get("n", 0) >= SHAPE_MIN_STEPS),
                key=lambda kv: kv[1]["cov_pct"], default=None)
    if worst and worst[1]["cov_pct"] > OSCILLATING_COV_PCT:
        k, v = worst
        yield Finding("medium", f"Step time varies within shape {k}",
                      f"CoV {v['cov_pct']:.0f} % over {v['n']} steps of one shape (> {OSCILLATING_COV_PCT:g} %); "
                      f"same shape, different time means host syncs, GC pauses, recompiles or throttling",
                      "`myxtts profile`", "step-cov", v["cov_pct"] / 2)


def _r_settings(m, bound, why):
    s = m.settings
    if s.on_gpu or m.gpu:
        if s.precision == "fp32":
            yield Finding("medium", "Training in fp32", "train.precision=fp32 on a GPU with tensor cores",
                          f"`train.precision={'fp16' if s.bf16_supported is False else 'bf16'}`", "precision", 30)
        elif s.precision == "fp16" and s.bf16_supported:
            yield Finding("low", "fp16 where bf16 is available",
                          "fp16 needs loss scaling and skips steps on overflow; this GPU supports bf16",
                          "`train.precision=bf16`", "precision", 5)
        if s.compile == "off" and bound != "launch-bound":
            yield Finding("medium", "The step runs eagerly", "train.compile=off: every op is a separate launch",
                          "`train.compile=auto` (inductor with CUDA graphs on a GPU)", "compile", 20)
    w, cpus = s.num_workers, s.cpu_count
    if w is not None and cpus and w > cpus - 1 and cpus > 1:
        yield Finding("low", "More loader workers than spare CPUs",
                      f"{w} workers on {cpus} CPUs: they compete with the training process",
                      f"`data.num_workers={cpus - 1}`", "workers-oversubscribed", 2)
    for g in m.gpu.gpus if m.gpu else []:
        yield from throttle_findings(g)
    other = m.other_pct
    if other is not None and other >= OTHER_PCT:
        le = s.log_every
        act = f"`train.log_every={le * 4}`" if le and le < 50 else "`myxtts profile` (time between steps)"
        yield Finding("medium", "Host time between steps",
                      f"{other:.0f} % of wall time is outside the loader, the copy and the step (>= {OTHER_PCT:g} %): "
                      f"logging, validation, checkpoints or Python between steps", act, "other", other)


def _r_straggler(m, bound, why):
    """Under DDP, the rank every other rank waits for (observe/ranks.py)."""
    yield from straggler_findings(m)


def _r_unmeasured(m, bound, why):
    if m.util() is None and m.settings.device != "cpu" and bound != "compiling":
        reason = m.not_measured.get("gpu", "no GPU samples were given")
        yield Finding("info", "GPU utilisation not measured", reason,
                      "install nvidia-ml-py (`pip install 'myxtts[gpu]'`) and run on an NVIDIA GPU",
                      "unmeasured", 0)


RULES = [_r_device, _r_compiling, _r_idle_gpus, input_findings, _r_recompiles, _r_syncs, _r_launch,
         kernel_findings, _r_underfill, _r_oscillation, _r_memory, padding_findings, _r_settings, _r_compute,
         _r_straggler, _r_unmeasured]


def diagnose(m: Measured) -> Diagnosis:
    """Classify the run and return its findings, most severe and most costly first."""
    bound, why = classify(m)
    return Diagnosis(bound, why, ranked([f for rule in RULES for f in rule(m, bound, why)]))
