"""The training step in each execution mode, on the same model and the same batches
(``myxtts bench train``).

  eager_fp32           train.compile=off, fp32 (TF32 matmuls on a GPU, as the trainer runs fp32)
  eager_amp            train.compile=off, bf16 autocast (fp16 + GradScaler on a GPU without
                       bf16, or train.precision=fp16; on the CPU bf16 autocast if this build
                       supports it, else skipped)
  compiled             train.compile=default (inductor), at the precision a training run uses
                       (train.precision; auto: bf16 on a GPU, fp32 on the CPU)
  compiled_cudagraphs  train.compile=cudagraphs (inductor + CUDA graphs); GPU only
  compiled_regional    train.compile=regional (only the transformer blocks, dynamic shapes:
                       one compile for every shape, the rest of the step eager)

Every mode starts from the same initial weights (train.seed) and is measured by
``observe.measure`` on one ``FixedBatches`` (one real batch per bucket shape, built on the
device once before any mode runs): compiled per shape, warmed up, then ``steps`` timed steps of
one micro-batch each, cycling through the batches. Mel frames/s counts real frames. MFU is the
FLOPs of the timed steps (counted once per shape with FlopCounterMode on the eager model; a
compiled step runs the same maths) per second against the device's dense bf16 peak
(``observe.flops``), None on the CPU or a GPU not in the table. compile_speedup = compiled
frames/s / frames/s of the eager mode at the same precision: eager_amp on a GPU, eager_fp32 on
the CPU (whose training default is fp32). Eager modes report ``ops_per_step``: the ATen ops one
optimizer step dispatches on the first batch (``observe.ops``; a device-independent proxy for
kernel launches), and the host syncs among them. ``time_to_full_speed_s`` counts from the start
of the mode, building the run included (``train.timers``).
"""
from __future__ import annotations

import gc
import time
from pathlib import Path

import torch

from myxtts.data.cache import Cache
from myxtts.errors import UserError
from myxtts.observe.measure import FixedBatches, measure
from myxtts.observe.ops import count_step_ops
from myxtts.train.build import build_run, resolve_plan
from myxtts.train.precision import device_name, resolve

MODES = ("eager_fp32", "eager_amp", "compiled", "compiled_cudagraphs", "compiled_regional")
COMPILED = ("compiled", "compiled_cudagraphs", "compiled_regional")


def compare(cfg, data: Path, device: torch.device, steps: int, *, selected: tuple[str, ...] = MODES,
            backend: str | None = None, about: dict | None = None, say=print, save=None) -> dict:
    """Each mode of ``selected`` measured for ``steps`` timed steps on the same batches of the
    cache ``data``; the rest skipped, with the reason. ``backend``: torch.compile's (default
    inductor). ``about``: the caller's fields of the record (its ``note``, when given, is said
    before the modes run). ``save(record)`` runs as each mode finishes, so that a run cut short
    keeps the modes it finished. → the record (``summarise``)."""
    # data.frame_budget=auto is resolved once, as a training run here would resolve it, so the
    # batches match the runs the modes build and no mode's time includes a memory search.
    plan = resolve_plan(cfg, data)
    sized = plan.apply(cfg)
    batches = FixedBatches(Cache(data, expect=sized), sized, device)
    if not len(batches):
        raise UserError(f"{data}: no training batches")
    say(f"{len(batches)} batches (one per bucket shape, B x Tt x Tm): "
        + " ".join("x".join(map(str, s)) for s in batches.shapes) + f"; {steps} timed steps per mode")
    for note in [*plan.notes, *([about["note"]] if (about or {}).get("note") else [])]:
        say(note)
    settings = mode_settings(cfg, device)
    run_precision, results = settings["compiled"][0], {}
    head = {"device": device_name(device), "device_type": device.type, **(about or {}), "cache": str(data),
            "steps": steps, "compile_backend": backend or "inductor", "frame_budget": plan.frame_budget,
            "shapes": [list(s) for s in batches.shapes], "modes_selected": list(selected)}
    for name in MODES:
        precision, compile_mode, reason = settings[name]
        reason = "not selected (--modes)" if name not in selected else reason
        if reason:
            results[name] = skipped(reason, precision)
            say(f"  {name}: skipped ({reason})")
            continue
        if compile_mode != "off":
            torch.compiler.reset()  # each compiled mode compiles its own graphs from scratch
        say(f"  {name}: precision {precision}, compile {compile_mode}"
            + (f" ({backend or 'inductor'})" if compile_mode != "off" else "") + " ...")
        results[name] = run_mode(sized, data, batches, steps, precision, compile_mode, backend)
        if save:  # what is finished survives a time limit
            save(summarise(head, results, run_precision))
    torch.compiler.reset()
    return summarise(head, results, run_precision)


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


def mode_settings(cfg, device: torch.device) -> dict[str, tuple[str | None, str, str | None]]:
    """mode → (precision, train.compile, why it is skipped or None)."""
    run_precision = resolve(cfg.train.precision, device).name  # what a training run uses
    amp, amp_reason = (run_precision, "") if run_precision != "fp32" else amp_precision(device)
    cpu = device.type != "cuda"
    return {"eager_fp32": ("fp32", "off", None),
            "eager_amp": (amp, "off", None if amp else amp_reason),
            "compiled": (run_precision, "default", None),
            "compiled_cudagraphs": (run_precision, "cudagraphs",
                                    "needs a CUDA GPU (CUDA graphs)" if cpu else None),
            "compiled_regional": (run_precision, "regional", None)}


def run_mode(cfg, data, batches: FixedBatches, steps: int, precision: str, compile_mode: str,
             backend: str | None) -> dict:
    """Build a run in one mode and measure it on ``batches``."""
    t_start = time.perf_counter()
    run = build_run(cfg, data, precision=precision, compile=compile_mode, backend=backend,
                    with_batches=False)
    build_s = time.perf_counter() - t_start
    m = measure(run, steps, batches=batches, origin=t_start, flops=True)
    ops = count_step_ops(run.step_fn, batches.batches[0].tensors) if compile_mode == "off" else None
    params = sum(p.numel() for p in run.model.parameters())
    del run
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    tput = m["throughput"]
    return {"skipped": False, "reason": None, "precision": precision, "compile": compile_mode,
            "backend": backend if compile_mode != "off" else None, "build_s": build_s,
            "steps": m["steps"], "seconds": m["wall_s"], "step_ms": m["step_ms"],
            "samples_per_s": tput["samples_per_s"], "frames_per_s": tput["frames_per_s"],
            "achieved_tflops": m["achieved_tflops"], "mfu": m["mfu_pct"],
            "mfu_reason": None if m["mfu_pct"] is not None else m["mfu_basis"],
            "mfu_basis": m["mfu_basis"], "warmup_s": m["warmup_s"], "warmup_passes": m["warmup_passes"],
            "compile_s": m["compile_s"], "compile_s_by_shape": m["compile_s_by_shape"],
            "time_to_full_speed_s": m["time_to_full_speed_s"],
            "step_ms_by_shape": {k: v["p50_ms"] for k, v in m["step_by_shape"].items()},
            "ops_per_step": ops.total if ops else None,
            "ops_shape": list(batches.shapes[0]) if ops else None,
            "host_sync_ops_per_step": sum(ops.syncs.values()) if ops else None,
            "graphs_compiled_in_warmup": m["graphs_compiled_in_warmup"],
            "recompiles_after_warmup": m["recompiles_after_warmup"],
            "loss": m["loss"], "skipped_steps": m["skipped_steps"],
            "flops_by_shape": m["flops_by_shape"], "model_params": params}


def skipped(reason: str, precision: str | None = None) -> dict:
    return {"skipped": True, "reason": reason, "precision": precision, "steps": 0, "seconds": None,
            "step_ms": None, "samples_per_s": None, "frames_per_s": None, "achieved_tflops": None,
            "mfu": None, "mfu_reason": reason, "recompiles_after_warmup": None, "compile_s": None,
            "compile_s_by_shape": None, "time_to_full_speed_s": None, "ops_per_step": None}


def summarise(head: dict, results: dict, run_precision: str) -> dict:
    """The record of the modes finished so far (``modes_pending``: the rest)."""
    done = dict(results)
    ran = [done[m]["recompiles_after_warmup"] for m in COMPILED if m in done and not done[m]["skipped"]]
    base_mode = "eager_fp32" if run_precision == "fp32" else "eager_amp"  # same precision
    comp, ref = done.get("compiled"), done.get(base_mode)
    speedup = comp["frames_per_s"] / ref["frames_per_s"] \
        if comp and ref and not comp["skipped"] and ref["frames_per_s"] else None
    ran_any = next((done[m] for m in MODES if m in done and not done[m]["skipped"]), {})
    return {**head, "model_params": ran_any.get("model_params"), "flops_by_shape": ran_any.get("flops_by_shape"),
            "modes_pending": [m for m in head["modes_selected"] if m not in done],
            "train": dict(done, recompiles_after_warmup=max(ran) if ran else None),
            "compile_speedup": speedup,
            "compile_speedup_basis": f"compiled ({run_precision}) frames/s / {base_mode} frames/s"}
