"""`myxtts bench train`: the training step in each execution mode, on the same model and the
same batches, in one run (``observe.modes`` defines the modes and every figure).

``--modes`` picks modes (comma list). The JSON file is rewritten as each mode finishes, so a run
cut short by a time limit keeps the modes it finished.

``--quick`` on a CPU uses the tiny preset with a smaller model and compiles with the aot_eager
backend (dynamo capture + AOTAutograd forward/backward without inductor's C++ code generation,
which takes minutes per shape on a small CPU): it checks the compile path and its recompiles,
but its speed figures are not inductor's. Without ``--quick`` the real default backend runs.
"""
from __future__ import annotations

from pathlib import Path

import torch

from myxtts.commands.common import check_output
from myxtts.config import load
from myxtts.data.prepare import demo_cache
from myxtts.errors import UserError
from myxtts.files import write_json as atomic_write_json
from myxtts.observe import modes as M
from myxtts.observe.format import fmt
from myxtts.observe.measure import FixedBatches

HELP = "eager fp32 vs bf16 autocast vs torch.compile vs CUDA graphs: training throughput, MFU, recompiles"
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
    p.add_argument("--modes", help=f"comma list of modes to run (default: all): {','.join(M.MODES)}")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. model.d_model=256")


def run(args) -> int:
    from myxtts.data.cache import Cache
    from myxtts.train.build import resolve_plan
    from myxtts.train.precision import device_name, pick_device

    device = pick_device(0)
    cpu = device.type != "cuda"
    quick_cpu = bool(args.quick) and cpu
    config = args.config or ("tiny" if quick_cpu else "base")
    overrides = (QUICK_CPU if quick_cpu and not args.config else []) + list(args.overrides)
    cfg = load(config, overrides)
    if args.steps is not None and args.steps < 1:  # 0 too: it is not "the default"
        raise UserError(f"--steps must be at least 1, got {args.steps}")
    steps = args.steps or ((4 if args.quick else 10) if cpu else (10 if args.quick else 30))
    check_output(args.json, "--json")
    selected = parse_modes(args.modes)
    path = Path(args.data) if args.data else demo_cache(cfg)
    # data.frame_budget=auto is resolved once, as a training run here would resolve it, so the
    # batches match the runs the modes build and no mode's time includes a memory search.
    plan = resolve_plan(cfg, path)
    sized = plan.apply(cfg)
    batches = FixedBatches(Cache(path, expect=sized), sized, device)
    if not len(batches):
        raise UserError(f"{path}: no training batches")
    settings = M.mode_settings(cfg, device)
    backend = "aot_eager" if quick_cpu else None
    say = print
    say(f"myxtts bench train: {device_name(device)}, config {config}"
        + (f" + {' '.join(overrides)}" if overrides else ""))
    say(f"{len(batches)} batches (one per bucket shape, B x Tt x Tm): "
        + " ".join("x".join(map(str, s)) for s in batches.shapes) + f"; {steps} timed steps per mode")
    for note in plan.notes:
        say(note)
    if quick_cpu:
        say(CPU_QUICK_NOTE)

    run_precision = settings["compiled"][0]
    results = {}
    head = {"device": device_name(device), "device_type": device.type, "config": config,
            "overrides": overrides, "cache": str(path), "quick": bool(args.quick), "steps": steps,
            "compile_backend": backend or "inductor", "note": CPU_QUICK_NOTE if quick_cpu else None,
            "frame_budget": plan.frame_budget, "shapes": [list(s) for s in batches.shapes],
            "modes_selected": list(selected)}
    for name in M.MODES:
        precision, compile_mode, reason = settings[name]
        if name not in selected:
            reason = "not selected (--modes)"
        if reason:
            results[name] = M.skipped(reason, precision)
            say(f"  {name}: skipped ({reason})")
            continue
        if compile_mode != "off":
            torch._dynamo.reset()  # each compiled mode compiles its own graphs from scratch
        say(f"  {name}: precision {precision}, compile {compile_mode}"
            + (f" ({backend or 'inductor'})" if compile_mode != "off" else "") + " ...", flush=True)
        results[name] = M.run_mode(sized, path, batches, steps, precision, compile_mode, backend)
        if args.json:  # what is finished survives a time limit
            write_json(args.json, M.summarise(head, results, run_precision))
    torch._dynamo.reset()

    result = M.summarise(head, results, run_precision)
    print_table(result)
    if args.json:
        write_json(args.json, result)
    return 0


def parse_modes(text: str | None) -> tuple[str, ...]:
    """``--modes`` → the selected modes in the order they run; all when not given."""
    if not text:
        return M.MODES
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in M.MODES]
    if bad or not names:
        raise UserError(f"--modes {text!r}: unknown mode {', '.join(bad) or '(none given)'}; "
                        f"choose from {','.join(M.MODES)}")
    return tuple(m for m in M.MODES if m in names)


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
    for name in M.MODES:
        m = r["train"][name]
        if m["skipped"]:
            print(f"{name:<21}  skipped: {m['reason']}")
            continue
        print(f"{name:<21}{m['precision']:>10}{m['compile']:>12}{m['samples_per_s']:>11,.1f}"
              f"{m['frames_per_s']:>11,.0f}{m['step_ms']:>9.1f}{fmt(m['mfu'], '{:.1f}', '-'):>7}"
              f"{fmt(m['ops_per_step'], '{:,}', '-'):>10}{fmt(m['compile_s'], '{:.1f}', '-'):>11}"
              f"{fmt(m['time_to_full_speed_s'], '{:.1f}', '-'):>14}{m['recompiles_after_warmup']:>12}")
    print()
    for name in M.COMPILED:
        by_shape = r["train"][name].get("compile_s_by_shape")
        if by_shape:
            print(f"{name} compile s per shape: " + ", ".join(f"{k} {v:.1f}" for k, v in by_shape.items()))
    reasons = {m["mfu_reason"] for m in (r["train"][n] for n in M.MODES) if not m["skipped"]} - {None}
    if reasons:
        print(f"MFU: not reported ({'; '.join(sorted(reasons))})")
    print(f"compile speedup: {fmt(r['compile_speedup'], '{:.2f}x', '-')} ({r['compile_speedup_basis']})")
    print(f"recompiles after warm-up (compiled modes): {fmt(r['train']['recompiles_after_warmup'], '{}', '-')}")
    if r["note"]:
        print(r["note"])
