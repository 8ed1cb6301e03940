"""`myxtts bench loader`: a naive loader against ours, on the same data and
the same number of workers, in one run (``observe.loaders.compare`` measures them).

  naive      decodes, resamples, trims and computes the mel of every item on the CPU, every
             epoch, random batches padded by collate_fn: what many TTS trainers do (the "before").
  cached     make_loader: workers slice the prepared cache into fixed bucket shapes.
  simulated  the cached loader feeding a consumer that holds every batch for the time an H100
             needs for that batch's training step; input-bound % = time blocked waiting for
             the next batch / wall time (docs/design.md, "How we measure").

The simulated step comes from the FLOPs of the model (``--config``, base by default) at an
assumed 40 % MFU of the H100 SXM's dense bf16 peak (``observe.flops.simulated_step_ms``);
``--step-ms`` overrides it. The consumer sleeps in the GPU's place, so the measurement covers
the host side of the GPU path (workers, shared memory, pinning when a GPU is present) but not
the host-to-device copy, which the DevicePrefetcher overlaps with the step.
"""
from __future__ import annotations

import json
from pathlib import Path

from myxtts.commands.common import check_output
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import demo_cache
from myxtts.errors import UserError
from myxtts.observe.input_rules import INPUT_BOUND_TARGET_PCT, PADDING_LOW_PCT
from myxtts.observe.loaders import compare

HELP = "naive vs cached loader throughput, padding, input-bound % against a simulated H100"


def add_arguments(p) -> None:
    p.add_argument("--data", help="prepared cache (default: prepare the bundled demo corpus)")
    p.add_argument("--quick", action="store_true", help="fewer batches: under a minute on 2 cores")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--workers", type=int, help="loader workers for both loaders (default: data.num_workers)")
    p.add_argument("--step-ms", type=float, help="simulated step time instead of the derived one")
    p.add_argument("--config", default="base", help="preset or YAML whose model sets the step time")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. data.pad_multiple=16")


def run(args) -> int:
    if args.workers is not None and args.workers < 0:
        raise UserError(f"--workers must be 0 (load in this process) or more, got {args.workers}")
    if args.step_ms is not None and args.step_ms <= 0:
        raise UserError(f"--step-ms must be positive, got {args.step_ms:g}")
    check_output(args.json, "--json")
    cfg = load(args.config, args.overrides)
    workers = cfg.data.num_workers if args.workers is None else args.workers
    cache = Cache(Path(args.data) if args.data else demo_cache(cfg))
    result = {"config": args.config, "overrides": list(args.overrides),
              **compare(cache, cfg, workers, args.quick, args.step_ms)}
    print_table(result)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1, default=_plain) + "\n")
    return 0


def _plain(o):
    return o.item() if hasattr(o, "item") else str(o)  # numpy scalars → JSON numbers


def print_table(r: dict) -> None:
    ld, st = r["loader"], r["simulated_step"]
    nv, ca, sim = ld["naive"], ld["cached"], ld["cached"]["simulated"]
    ok = lambda b: "ok" if b else "MISSED"  # noqa: E731
    print(f"myxtts bench loader: {r['device']}, {r['workers']} workers, config {r['config']}"
          + (f" + {' '.join(r['overrides'])}" if r["overrides"] else ""))
    print(f"corpus: {r['corpus']['train_utterances']} training utterances, "
          f"{r['corpus']['train_minutes']} min, {r['corpus']['speakers']} speakers ({r['cache']})")
    print(f"shapes (B, Tt, Tm): {len(ld['shapes'])}: {' '.join(str(tuple(s)) for s in ld['shapes'])}")
    print(f"padding: mel {ld['padding_pct']:.1f} %, text {ld['text_padding_pct']:.1f} %; "
          f"filler rows {ld['filler_pct']:.1f} % of frames; {ld['batches_per_epoch']} batches/epoch")
    print("  mel padding by data.pad_multiple: "
          + ", ".join(f"{k}: {v['mel_padding_pct']:.1f} %" for k, v in ld["padding_by_pad_multiple"].items()))
    print()
    print(f"{'loader':<34}{'mel frames/s':>14}{'batches':>9}{'vs naive':>10}")
    print(f"{'naive (decode + mel per item)':<34}{nv['frames_per_s']:>14,.0f}{nv['batches']:>9}{1.0:>9.1f}x")
    print(f"{'cached, compact (GPU path)':<34}{ca['frames_per_s']:>14,.0f}{ca['batches']:>9}{ca['speedup']:>9.1f}x")
    print(f"{'cached, float32 (CPU path)':<34}{ca['frames_per_s_float32']:>14,.0f}{ca['batches'] // 2:>9}"
          f"{ca['speedup_float32']:>9.1f}x")
    print()
    if st["source"] == "derived":
        print(f"simulated H100 step: {st['mean_ms']:.2f} ms per batch on average "
              f"({st['model_params'] / 1e6:.1f} M params; {st['formula']}, MFU {st['mfu_assumed']:.0%} "
              f"of {st['peak_tflops']:g} TFLOP/s)")
    else:
        print(f"simulated step: {st['mean_ms']:.2f} ms per batch (--step-ms)")
    wm = sim["wait_ms"]
    print(f"input-bound: {sim['input_bound_pct']:.2f} % (blocked {sim['wait_s']:.3f} s of "
          f"{sim['wall_s']:.2f} s over {sim['batches']} batches; wait per batch p50 {wm['p50']:.2f} ms, "
          f"p99 {wm['p99']:.2f} ms, max {wm['max']:.1f} ms; {wm['batches_waiting_over_1ms']} waited > 1 ms)")
    la = r["load_avg_1min"]
    if max(la["before"], la["after"]) > 0.5 * la["cores"]:
        print(f"note: load average {la['before']:.1f} -> {la['after']:.1f} on {la['cores']} cores: "
              "other processes competed for the CPU during this run")
    t = r["targets"]
    print(f"targets: cached >= 20x naive {ok(t['cached_vs_naive_ge_20x'])}; input-bound < "
          f"{INPUT_BOUND_TARGET_PCT:g} % {ok(t['input_bound_lt_1pct'])}; padding <= {PADDING_LOW_PCT:g} % "
          f"{ok(t['padding_le_10pct'])}")
