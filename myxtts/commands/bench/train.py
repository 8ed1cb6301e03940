"""`myxtts bench train`: the training step in each execution mode, on the same model and the
same batches, in one run (``observe.modes`` defines the modes and every figure, and
``observe.modes.compare`` measures them).

``--modes`` picks modes (comma list). The JSON file is rewritten as each mode finishes, so a run
cut short by a time limit keeps the modes it finished.

``--quick`` on a CPU uses the tiny preset with a smaller model and compiles with the aot_eager
backend (dynamo capture + AOTAutograd forward/backward without inductor's C++ code generation,
which takes minutes per shape on a small CPU): it checks the compile path and its recompiles,
but its speed figures are not inductor's. Without ``--quick`` the real default backend runs.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from myxtts.commands.common import check_output
from myxtts.config import load
from myxtts.data.prepare import demo_cache
from myxtts.errors import UserError
from myxtts.files import write_json as atomic_write_json
from myxtts.observe import modes as M
from myxtts.observe.format import fmt

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
    selected = M.parse_modes(args.modes)
    path = Path(args.data) if args.data else demo_cache(cfg)
    print(f"myxtts bench train: {device_name(device)}, config {config}"
          + (f" + {' '.join(overrides)}" if overrides else ""))
    about = {"config": config, "overrides": overrides, "quick": bool(args.quick),
             "note": CPU_QUICK_NOTE if quick_cpu else None}
    result = M.compare(cfg, path, device, steps, selected=selected, backend="aot_eager" if quick_cpu else None,
                       about=about, say=partial(print, flush=True),
                       save=partial(write_json, args.json) if args.json else None)
    print_table(result)
    if args.json:
        write_json(args.json, result)
    return 0


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
