"""`myxtts bench loader`: a naive loader against ours, on the same data and
the same number of workers, in one run (``observe.loaders`` measures them).

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
import os
from pathlib import Path

import numpy as np

from myxtts.commands.common import check_output
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import demo_cache
from myxtts.data.sampler import make_sampler
from myxtts.errors import UserError
from myxtts.observe import loaders as L
from myxtts.observe.diagnose import INPUT_BOUND_TARGET_PCT, PADDING_LOW_PCT
from myxtts.observe.flops import simulated_step_ms
from myxtts.train.precision import device_name

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
    load_before = os.getloadavg()[0]  # other processes' CPU use skews every number below
    if args.workers is not None and args.workers < 0:
        raise UserError(f"--workers must be 0 (load in this process) or more, got {args.workers}")
    if args.step_ms is not None and args.step_ms <= 0:
        raise UserError(f"--step-ms must be positive, got {args.step_ms:g}")
    check_output(args.json, "--json")
    cfg = load(args.config, args.overrides)
    workers = cfg.data.num_workers if args.workers is None else args.workers
    path = Path(args.data) if args.data else demo_cache(cfg)
    cache = Cache(path)
    n_naive, n_cached, n_sim = (4, 200, 300) if args.quick else (20, 1000, 1500)
    train = cache.indices("train")
    sampler = make_sampler(cache, cfg, "train")
    rep = sampler.padding_report()
    shapes = sampler.shapes()
    mean_rows = float(np.mean([len(p.indices) for p in sampler.plan()]))

    if args.step_ms:
        step_ms = {s: args.step_ms for s in shapes}
        step_info = {"source": "--step-ms", "formula": f"fixed {args.step_ms} ms per batch"}
    else:
        step_ms, step_info = simulated_step_ms(cfg, cache, shapes, args.quick)
    weights = {s: sum(p.mel_len == s[2] and len(p.indices) == s[0] for p in sampler.plan()) for s in shapes}
    mean_ms = sum(step_ms[s] * w for s, w in weights.items()) / max(1, sum(weights.values()))

    # (a) naive: same workers, random batches of the cached plan's mean size
    batch_size = max(1, round(mean_rows))
    naive = L.throughput(L.naive_loader(cache, cfg, workers, batch_size), n_naive, warm_up=workers)
    naive["batch_size"] = batch_size
    # (b) cached, as the GPU path consumes it (worker form) and as the float32 contract
    loader = L.cached_loader(cache, cfg, workers)
    ahead = cfg.data.prefetch_factor * max(1, workers) + 2  # DataLoader queue + host thread
    cached = L.throughput(L.tensors(loader.iterate(None)), n_cached, warm_up=ahead)
    cached["frames_per_s_float32"] = L.throughput(L.tensors(iter(loader)), n_cached // 2, warm_up=ahead)["frames_per_s"]
    # (c) the same loader feeding the simulated H100
    sim = L.simulate(loader, step_ms, n_sim)

    result = {
        "device": device_name(), "workers": workers, "config": args.config,
        "overrides": list(args.overrides), "cache": str(path),
        "corpus": {"train_utterances": int(train.size), "speakers": len(cache.speakers),
                   "train_minutes": round(float(cache.index.n_frames[train].sum()) * cache.audio_cfg.hop_length
                                          / cache.audio_cfg.sample_rate / 60, 2)},
        "loader": {
            "naive": naive,
            "cached": dict(cached, speedup=cached["frames_per_s"] / naive["frames_per_s"],
                           speedup_float32=cached["frames_per_s_float32"] / naive["frames_per_s"],
                           input_bound_pct=sim["input_bound_pct"], simulated=sim),
            "padding_pct": rep["mel_padding_pct"], "text_padding_pct": rep["text_padding_pct"],
            "filler_pct": rep["filler_pct"], "shapes": [list(s) for s in shapes],
            "batches_per_epoch": len(sampler), "frame_budget": cfg.data.frame_budget,
            "pad_multiple": cfg.data.pad_multiple, "max_buckets": cfg.data.max_buckets,
            "padding_by_pad_multiple": L.padding_by_multiple(cache, cfg)},
        "simulated_step": dict(step_info, mean_ms=mean_ms),
        "quick": bool(args.quick),
        "load_avg_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2),
                          "cores": os.cpu_count()},
    }
    result["targets"] = {
        "cached_vs_naive_ge_20x": result["loader"]["cached"]["speedup"] >= 20,
        "input_bound_lt_1pct": sim["input_bound_pct"] < INPUT_BOUND_TARGET_PCT,
        "padding_le_10pct": rep["mel_padding_pct"] <= PADDING_LOW_PCT}
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
