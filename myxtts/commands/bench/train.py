"""`myxtts bench train`: the training step in each execution mode, on the same model and the
same batches, in one run.

  eager_fp32           train.compile=off, fp32 (TF32 matmuls on a GPU, as the trainer runs fp32)
  eager_amp            train.compile=off, bf16 autocast (fp16 + GradScaler on a GPU without
                       bf16, or train.precision=fp16; on the CPU bf16 autocast if this build
                       supports it, else skipped)
  compiled             train.compile=default (inductor), at the precision a training run uses
                       (train.precision; auto: bf16 on a GPU, fp32 on the CPU)
  compiled_cudagraphs  train.compile=cudagraphs (inductor + CUDA graphs); GPU only
  compiled_regional    train.compile=regional (only the transformer blocks, dynamic shapes:
                       one compile for every shape, the rest of the step eager)

Every mode starts from the same initial weights (train.seed) and steps through one fixed list
of real batches from the cache, one per bucket shape, built on the device once before any mode
runs. Each mode first warms up over every shape (each compiles there, once), then times
``--steps`` optimizer steps of one micro-batch each, cycling through the list: on a GPU between
two ``torch.cuda.synchronize`` calls, on the CPU with ``perf_counter``. Mel frames/s counts real
frames (``mel_lens``, summed on the host before the timed loop); MFU is the FLOPs of the steps
(counted once per batch with FlopCounterMode on the eager model; a compiled step runs the same
maths) per second against the device's dense bf16 peak (``observe.flops``), None on the CPU or
a GPU not in the table. Recompiles after warm-up = graphs dynamo compiled during the timed loop
(0 expected: one graph per bucket shape, all compiled during warm-up). compile_speedup =
compiled frames/s / frames/s of the eager mode at the same precision: eager_amp on a GPU,
eager_fp32 on the CPU (whose training default is fp32).

Compiled modes first compile every shape (``compile_shape``: forward, loss and backward of one
batch, gradients dropped), timed per shape: ``compile_s_by_shape`` and their sum ``compile_s``.
Eager modes report ``ops_per_step``: the ATen ops one optimizer step dispatches on the first
batch (``observe.ops``; a device-independent proxy for kernel launches), and the host-sync ops
among them. ``time_to_full_speed_s`` is the wall time from the start of the mode (building the
run included) to the end of the first warm-up step from which every step runs within 10 % of
its shape's steady-state median (the medians come from the timed steps, timed one by one with
CUDA events on a GPU, so no sync is added between them); it is reported when ``--steps`` covers
every shape, None otherwise.

``--modes`` picks modes (comma list). The JSON file is rewritten as each mode finishes, so a run
cut short by a time limit keeps the modes it finished.

``--quick`` on a CPU uses the tiny preset with a smaller model and compiles with the aot_eager
backend (dynamo capture + AOTAutograd forward/backward without inductor's C++ code generation,
which takes minutes per shape on a small CPU): it checks the compile path and its recompiles,
but its speed figures are not inductor's. Without ``--quick`` the real default backend runs.
"""
from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path

import torch

from myxtts.commands.bench import demo_cache, device_name
from myxtts.config import Config, load
from myxtts.data.cache import write_json as atomic_write_json
from myxtts.errors import UserError
from myxtts.observe.format import fmt
from myxtts.train.compile import compile_batches
from myxtts.train.loop import FULL_SPEED_WITHIN
from myxtts.train.precision import device_name as accelerator_name
from myxtts.train.precision import sync

HELP = "eager fp32 vs bf16 autocast vs torch.compile vs CUDA graphs: training throughput, MFU, recompiles"
MODES = ("eager_fp32", "eager_amp", "compiled", "compiled_cudagraphs", "compiled_regional")
COMPILED = ("compiled", "compiled_cudagraphs", "compiled_regional")
# --quick on a CPU: a model small enough that four modes (two of them compiling) fit in minutes.
QUICK_CPU = ["model.d_model=64", "model.n_heads=2", "model.text_layers=1", "model.decoder_layers=1",
             "model.ref_channels=32", "model.prenet_dim=32", "model.postnet_channels=32",
             "model.postnet_layers=2", "model.n_latents=4", "data.frame_budget=1200",
             "data.max_buckets=2"]
CPU_QUICK_NOTE = "CPU quick mode: compiled with aot_eager; speed figures are not inductor's"


def add_arguments(p) -> None:
    p.add_argument("--config", help="preset or YAML (default: base; tiny with a smaller model "
                                    "under --quick on a CPU)")
    p.add_argument("--data", help="prepared cache (default: prepare the bundled demo corpus)")
    p.add_argument("--quick", action="store_true",
                   help="fewer steps; on a CPU a small model and the aot_eager compile backend "
                        "(under 3 minutes on 2 cores)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--steps", type=int, help="timed steps per mode (default: 30, --quick 10; "
                                             "on a CPU 10, --quick 4)")
    p.add_argument("--modes", help=f"comma list of modes to run (default: all): {','.join(MODES)}")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. model.d_model=256")


# ------------------------------------------------------------------------------------ setup


def amp_precision(device: torch.device) -> tuple[str | None, str]:
    """(train.precision for eager_amp, "") or (None, why it is skipped)."""
    if device.type == "cuda":
        return ("bf16", "") if torch.cuda.is_bf16_supported() else ("fp16", "")
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.ones(4, 4) @ torch.ones(4, 4)
        if y.dtype != torch.bfloat16:
            return None, "bf16 autocast is a no-op on this CPU build"
    except Exception as e:  # noqa: BLE001 - any failure means "not supported here"
        return None, f"bf16 autocast unsupported on this CPU ({type(e).__name__}: {e})"
    return "bf16", ""


def fixed_batches(cfg: Config, cache, device: torch.device):
    """One real batch per bucket shape (its first batch of epoch 0), on the device, with the
    real mel frames and rows of each counted on the host."""
    from myxtts.data.loader import DevicePrefetcher, make_sampler
    from myxtts.train.batches import BucketBatches, bucket_plan

    sampler = make_sampler(cache, cfg, "train")
    first = {}
    for p in sampler.global_plan(0):
        first.setdefault(p.bucket, p)
    bb = BucketBatches(cache, cfg, device)
    batches, frames, rows = [], [], []
    for b in range(len(sampler.buckets)):
        host = bb.host(first[b] if b in first else bucket_plan(sampler, b))
        frames.append(int(host["mel_lens"].sum()))
        rows.append(int(host["mel_lens"].shape[0]))
        batches.append(next(iter(DevicePrefetcher([host], device, bb.transform))))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    shapes = [(int(x["tokens"].shape[0]), int(x["tokens"].shape[1]), int(x["mel"].shape[1]))
              for x in batches]
    return sampler, batches, frames, rows, shapes


# ------------------------------------------------------------------------------------ modes

class _StepClock:
    """Per-step durations without a host sync between steps: CUDA events on a GPU (read after
    the final sync), ``perf_counter`` on a CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append(ev)
        else:
            self.marks.append(time.perf_counter())

    def durations_ms(self) -> list[float]:
        m = self.marks
        if self.cuda:
            return [a.elapsed_time(b) for a, b in zip(m, m[1:])]
        return [(b - a) * 1e3 for a, b in zip(m, m[1:])]


def compile_each_shape(step, batches, shapes, device) -> dict:
    """Seconds to compile each shape (forward, loss and backward, gradients dropped, weights
    and random state untouched), keyed "BxTtxTm"."""
    return {"x".join(map(str, shape)): sec for shape, sec in zip(shapes, compile_batches(step, batches, device))}


def full_speed_at(warm: list[tuple[int, float, float]], medians: dict[int, float]) -> float | None:
    """warm: (batch index, step ms, end time s) of each warm-up step, in order → the end time of
    the first step from which every later warm-up step is within 10 % of its shape's median;
    None if the last warm-up step is still slower (full speed came with the timed steps)."""
    if not medians:
        return None
    at = None
    for i, ms, end in warm:
        fast = ms <= (1 + FULL_SPEED_WITHIN) * medians[i]
        at = (end if at is None else at) if fast else None
    return at


def run_mode(rig, batches, frames, rows, flops, steps: int, warm_passes: int, peak_name: str,
             shapes, t_start: float) -> dict:
    from myxtts.observe.flops import mfu
    from myxtts.observe.ops import count_step_ops
    from myxtts.train.step import compiled_graphs

    step, dev, n = rig.step_fn, rig.device, len(batches)
    g0 = compiled_graphs()
    t0 = time.perf_counter()
    by_shape = compile_each_shape(step, batches, shapes, dev) if step.compile_mode != "off" else None
    warm = []
    for _ in range(warm_passes):  # every shape; a compiled step finishes compiling here
        for i, b in enumerate(batches):
            s0 = time.perf_counter()
            step([b])
            sync(dev)
            end = time.perf_counter()
            warm.append((i, (end - s0) * 1e3, end - t_start))
    warm_s = time.perf_counter() - t0
    graphs = compiled_graphs() - g0
    step.read_window()  # drop the warm-up losses
    order = [i % n for i in range(steps)]
    n_frames = sum(frames[i] for i in order)  # host-side, before the timed loop
    n_rows = sum(rows[i] for i in order)
    n_flops = sum(flops[i] for i in order) if flops else None

    g1 = compiled_graphs()
    clock = _StepClock(dev)
    sync(dev)
    t0 = time.perf_counter()
    timed_start = t0 - t_start
    clock.mark()
    for i in order:
        step([batches[i]])
        clock.mark()
    sync(dev)
    secs = time.perf_counter() - t0
    recompiles = compiled_graphs() - g1
    window = step.read_window()

    per_shape: dict[int, list[float]] = {}
    for i, ms in zip(order, clock.durations_ms()):
        per_shape.setdefault(i, []).append(ms)
    medians = {i: statistics.median(v) for i, v in per_shape.items()}
    # Judged only when every shape was timed: a shape without a median has no full speed.
    at = full_speed_at(warm, medians) if len(medians) == n else None
    ops = count_step_ops(step, batches[0]) if step.compile_mode == "off" else None

    m = mfu(n_flops, secs, peak_name) if n_flops else {"achieved_tflops": None, "mfu_pct": None,
                                                       "mfu_basis": "FLOPs not counted"}
    return {"skipped": False, "reason": None, "precision": rig.precision.name,
            "steps": steps, "seconds": secs, "step_ms": secs * 1e3 / steps,
            "samples_per_s": n_rows / secs, "frames_per_s": n_frames / secs,
            "achieved_tflops": m["achieved_tflops"], "mfu": m["mfu_pct"],
            "mfu_reason": None if m["mfu_pct"] is not None else m["mfu_basis"],
            "mfu_basis": m["mfu_basis"], "warmup_s": warm_s, "warmup_passes": warm_passes,
            "compile_s": sum(by_shape.values()) if by_shape is not None else None,
            "compile_s_by_shape": by_shape,
            "time_to_full_speed_s": (at if at is not None else timed_start) if len(medians) == n else None,
            "step_ms_by_shape": {"x".join(map(str, shapes[i])): v for i, v in sorted(medians.items())},
            "ops_per_step": ops.total if ops else None,
            "ops_shape": list(shapes[0]) if ops else None,
            "host_sync_ops_per_step": sum(ops.syncs.values()) if ops else None,
            "graphs_compiled_in_warmup": graphs, "recompiles_after_warmup": recompiles,
            "loss": window.get("loss"), "skipped_steps": window.get("skipped_steps")}


def skipped(reason: str, precision: str | None = None) -> dict:
    return {"skipped": True, "reason": reason, "precision": precision, "steps": 0, "seconds": None,
            "step_ms": None, "samples_per_s": None, "frames_per_s": None, "achieved_tflops": None,
            "mfu": None, "mfu_reason": reason, "recompiles_after_warmup": None, "compile_s": None,
            "compile_s_by_shape": None, "time_to_full_speed_s": None, "ops_per_step": None}


# ------------------------------------------------------------------------------------ run

def run(args) -> int:
    from myxtts.data.cache import Cache
    from myxtts.observe.flops import count_step_flops
    from myxtts.train.build import build_run, size_batches
    from myxtts.train.distributed import DistInfo
    from myxtts.train.precision import pick_device, resolve

    device = pick_device(0)
    cpu = device.type != "cuda"
    quick_cpu = bool(args.quick) and cpu
    config = args.config or ("tiny" if quick_cpu else "base")
    overrides = (QUICK_CPU if quick_cpu and not args.config else []) + list(args.overrides)
    cfg = load(config, overrides)
    steps = args.steps or ((4 if args.quick else 10) if cpu else (10 if args.quick else 30))
    if steps < 1:
        raise UserError("--steps must be at least 1")
    selected = parse_modes(args.modes)
    path = Path(args.data) if args.data else demo_cache(cfg)
    cache = Cache(path, expect=cfg)
    # data.frame_budget=auto is resolved once, as a training run here would resolve it, so the
    # batches match the runs the modes build and no mode's time includes a memory search.
    cfg, budget_note = size_batches(cfg, path, device, DistInfo())
    sampler, batches, frames, rows, shapes = fixed_batches(cfg, cache, device)
    if not batches:
        raise UserError(f"{path}: no training batches")
    peak_name = accelerator_name(device)
    run_precision = resolve(cfg.train.precision, device).name  # what a training run uses
    amp, amp_reason = (run_precision, "") if run_precision != "fp32" else amp_precision(device)
    backend = "aot_eager" if quick_cpu else "inductor"
    say = print
    say(f"myxtts bench train: {device_name()}, config {config}"
        + (f" + {' '.join(overrides)}" if overrides else ""))
    say(f"{len(batches)} batches (one per bucket shape, B x Tt x Tm): "
        + " ".join(f"{s[0]}x{s[1]}x{s[2]}" for s in shapes) + f"; {steps} timed steps per mode")
    if budget_note:
        say(budget_note)
    if quick_cpu:
        say(CPU_QUICK_NOTE)

    plan = {"eager_fp32": ("fp32", "off", None),
            "eager_amp": (amp, "off", None if amp else amp_reason),
            "compiled": (run_precision, "default", None),
            "compiled_cudagraphs": (run_precision, "cudagraphs",
                                    "needs a CUDA GPU (CUDA graphs)" if cpu else None),
            "compiled_regional": (run_precision, "regional", None)}
    results, flops, params = {}, None, None
    head = {"device": device_name(), "device_type": device.type, "config": config,
            "overrides": overrides, "cache": str(path), "quick": bool(args.quick), "steps": steps,
            "compile_backend": backend, "note": CPU_QUICK_NOTE if quick_cpu else None,
            "frame_budget": cfg.data.frame_budget, "shapes": [list(s) for s in shapes],
            "modes_selected": list(selected)}
    for name in MODES:
        precision, compile_mode, reason = plan[name]
        if name not in selected:
            reason = "not selected (--modes)"
        if reason:
            results[name] = skipped(reason, precision)
            say(f"  {name}: skipped ({reason})")
            continue
        if compile_mode != "off":
            torch._dynamo.reset()  # each compiled mode compiles its own graphs from scratch
        say(f"  {name}: precision {precision}, compile {compile_mode}"
            + (f" ({backend})" if compile_mode != "off" else "") + " ...", flush=True)
        t_start = time.perf_counter()
        rig = build_run(cfg, path, precision=precision, compile=compile_mode,
                        backend="aot_eager" if quick_cpu else None, with_batches=False)
        build_s = time.perf_counter() - t_start
        if flops is None:  # FLOPs of each batch's step, on the eager model before any update
            t0 = time.perf_counter()
            flops = [count_step_flops(rig.model, b) for b in batches]
            params = sum(p.numel() for p in rig.model.parameters())
            t_start += time.perf_counter() - t0  # not part of getting to full speed
        # Eager: one pass (allocator, kernels); compiled: a second pass after the compiles, in
        # case a first call's side effects change a guard; CUDA graphs record on later calls.
        warm_passes = {"off": 1, "default": 2, "regional": 2, "cudagraphs": 3}[compile_mode]
        results[name] = run_mode(rig, batches, frames, rows, flops, steps, warm_passes, peak_name,
                                 shapes, t_start)
        results[name].update(compile=compile_mode, build_s=build_s,
                             backend=backend if compile_mode != "off" else None)
        del rig
        gc.collect()
        if not cpu:
            torch.cuda.empty_cache()
        if args.json:  # what is finished survives a time limit
            write_json(args.json, summarise(head, results, params, flops, run_precision))
    torch._dynamo.reset()

    result = summarise(head, results, params, flops, run_precision)
    print_table(result)
    if args.json:
        write_json(args.json, result)
    return 0


def parse_modes(text: str | None) -> tuple[str, ...]:
    """``--modes`` → the selected modes in the order they run; all when not given."""
    if not text:
        return MODES
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in MODES]
    if bad or not names:
        raise UserError(f"--modes {text!r}: unknown mode {', '.join(bad) or '(none given)'}; "
                        f"choose from {','.join(MODES)}")
    return tuple(m for m in MODES if m in names)


def summarise(head: dict, results: dict, params, flops, run_precision: str) -> dict:
    """The JSON record of the modes finished so far (``modes_pending``: the rest)."""
    done = dict(results)
    ran = [done[m]["recompiles_after_warmup"] for m in COMPILED if m in done and not done[m]["skipped"]]
    base_mode = "eager_fp32" if run_precision == "fp32" else "eager_amp"  # same precision
    comp, ref = done.get("compiled"), done.get(base_mode)
    speedup = comp["frames_per_s"] / ref["frames_per_s"] \
        if comp and ref and not comp["skipped"] and ref["frames_per_s"] else None
    return {**head, "model_params": params, "flops_per_batch": flops,
            "modes_pending": [m for m in head["modes_selected"] if m not in done],
            "train": dict(done, recompiles_after_warmup=max(ran) if ran else None),
            "compile_speedup": speedup,
            "compile_speedup_basis": f"compiled ({run_precision}) frames/s / {base_mode} frames/s"}


def write_json(path, result: dict) -> None:
    """Write atomically: a run killed mid-write leaves the previous version."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, result)


def print_table(r: dict) -> None:
    print()
    print(f"{'mode':<21}{'precision':>10}{'compile':>12}{'samples/s':>11}{'frames/s':>11}"
          f"{'step ms':>9}{'MFU %':>7}{'ops/step':>10}{'compile s':>11}{'full speed s':>14}"
          f"{'recompiles':>12}")
    for name in MODES:
        m = r["train"][name]
        if m["skipped"]:
            print(f"{name:<21}  skipped: {m['reason']}")
            continue
        print(f"{name:<21}{m['precision']:>10}{m['compile']:>12}{m['samples_per_s']:>11,.1f}"
              f"{m['frames_per_s']:>11,.0f}{m['step_ms']:>9.1f}{fmt(m['mfu'], '{:.1f}', '-'):>7}"
              f"{fmt(m['ops_per_step'], '{:,}', '-'):>10}{fmt(m['compile_s'], '{:.1f}', '-'):>11}"
              f"{fmt(m['time_to_full_speed_s'], '{:.1f}', '-'):>14}{m['recompiles_after_warmup']:>12}")
    print()
    for name in COMPILED:
        by_shape = r["train"][name].get("compile_s_by_shape")
        if by_shape:
            print(f"{name} compile s per shape: " + ", ".join(f"{k} {v:.1f}" for k, v in by_shape.items()))
    reasons = {m["mfu_reason"] for m in (r["train"][n] for n in MODES) if not m["skipped"]} - {None}
    if reasons:
        print(f"MFU: not reported ({'; '.join(sorted(reasons))})")
    print(f"compile speedup: {fmt(r['compile_speedup'], '{:.2f}x', '-')} ({r['compile_speedup_basis']})")
    print(f"recompiles after warm-up (compiled modes): {fmt(r['train']['recompiles_after_warmup'], '{}', '-')}")
    if r["note"]:
        print(r["note"])
