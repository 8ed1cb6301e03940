"""`myxtts bench loader`: a naive loader against ours, on the same data and
the same number of workers, in one run.

  naive      a torch Dataset whose __getitem__ decodes the audio file, resamples, trims and
             computes the mel on the CPU (plus tokens), random batches padded by collate_fn:
             what many TTS trainers do every epoch (the "before").
  cached     make_loader: workers slice the prepared cache into fixed bucket shapes.
  simulated  the cached loader feeding a consumer that holds every batch for the time an H100
             needs for that batch's training step; input-bound % = time blocked waiting for
             the next batch / wall time (docs/design.md, "How we measure").

The simulated step: FLOPs of one forward + loss + backward of the model (``--config``, base by
default), counted with FlopCounterMode on meta tensors of each bucket shape, at an assumed 40 %
MFU of the H100 SXM dense bf16 peak (989 TFLOP/s): ms = FLOPs / (0.40 * 989e12) * 1e3.
``--step-ms`` overrides it. The consumer stands in for the GPU: it sleeps, so the measurement
covers the host side of the GPU path (workers, shared memory, pinning when a GPU is present)
but not the host-to-device copy, which the DevicePrefetcher overlaps with the step.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from myxtts import audio
from myxtts.commands.bench import demo_cache
from myxtts.commands.common import check_output
from myxtts.config import Config, load
from myxtts.data.cache import Cache
from myxtts.data.dataset import MEL_PAD, ref_frames_for
from myxtts.data.loader import make_loader, make_sampler
from myxtts.data.sampler import BucketSampler, round_up
from myxtts.errors import UserError
from myxtts.observe.diagnose import INPUT_BOUND_TARGET_PCT, PADDING_LOW_PCT
from myxtts.observe.flops import count_step_flops, peak_tflops
from myxtts.train.precision import device_name

HELP = "naive vs cached loader throughput, padding, input-bound % against a simulated H100"
MFU = 0.40
PEAK_TFLOPS, PEAK_BASIS = peak_tflops("NVIDIA H100 80GB HBM3")  # the simulated GPU, an H100 SXM


def add_arguments(p) -> None:
    p.add_argument("--data", help="prepared cache (default: prepare the bundled demo corpus)")
    p.add_argument("--quick", action="store_true", help="fewer batches: under a minute on 2 cores")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--workers", type=int, help="loader workers for both loaders (default: data.num_workers)")
    p.add_argument("--step-ms", type=float, help="simulated step time instead of the derived one")
    p.add_argument("--config", default="base", help="preset or YAML whose model sets the step time")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. data.pad_multiple=16")


# ------------------------------------------------------------------------------------ naive

class NaiveDataset(Dataset):
    """Per utterance, every epoch: decode → resample → trim → mel on the CPU."""

    def __init__(self, cache: Cache, indices):
        self.cache, self.indices = cache, np.asarray(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int):
        c, i = self.cache, int(self.indices[k])
        wav = audio.preprocess(audio.load_audio(c.source_root / c.audio_paths[i],
                                                c.audio_cfg.sample_rate), c.audio_cfg)
        mel = audio.mel_spectrogram(wav, c.audio_cfg)  # (T, n_mels)
        return torch.from_numpy(c.tokens(i).astype(np.int64)), torch.from_numpy(mel)


def naive_collate(items) -> dict:
    B = len(items)
    Tt, Tm = max(t.shape[0] for t, _ in items), max(m.shape[0] for _, m in items)
    tokens = torch.zeros(B, Tt, dtype=torch.long)
    mel = torch.full((B, Tm, items[0][1].shape[1]), MEL_PAD)  # (B, Tm, n_mels)
    for b, (t, m) in enumerate(items):
        tokens[b, :t.shape[0]], mel[b, :m.shape[0]] = t, m
    return {"tokens": tokens, "mel": mel, "mel_lens": torch.tensor([m.shape[0] for _, m in items])}


def epochs(loader):
    while True:
        yield from loader


def measure(it, n: int, warm_up: int) -> dict:
    """Throughput of ``n`` batches after ``warm_up`` batches: worker start-up and whatever the
    loader had queued ahead while starting are not counted, only its steady rate."""
    for _ in range(max(1, warm_up)):
        next(it)
    frames, t0 = 0, time.perf_counter()
    for _ in range(n):
        frames += int(next(it)["mel_lens"].sum())
    wall = time.perf_counter() - t0
    return {"frames_per_s": frames / wall, "batches": n, "seconds": wall, "frames": frames}


# ------------------------------------------------------------------------------ step model

def step_times(cfg: Config, cache: Cache, shapes, quick: bool) -> tuple[dict, dict]:
    """{(B, Tt, Tm): simulated step ms} and how it was derived."""
    from myxtts.models.xtts import XTTS, count_parameters

    n_mels = cache.audio_cfg.n_mels
    tr = int(round_up(ref_frames_for(cache.audio_cfg, cfg.data.ref_seconds), cfg.data.pad_multiple))
    with torch.device("meta"):
        model = XTTS(cfg.model, len(cache.vocab), n_mels).train()

    def flops(B, Tt, Tm) -> float:
        with torch.device("meta"):
            batch = {"tokens": torch.zeros(B, Tt, dtype=torch.long), "token_lens": torch.full((B,), Tt),
                     "mel": torch.zeros(B, Tm, n_mels), "mel_lens": torch.full((B,), Tm),
                     "ref_mel": torch.zeros(B, tr, n_mels), "ref_lens": torch.full((B,), tr),
                     "speaker": torch.zeros(B, dtype=torch.long), "index": torch.zeros(B, dtype=torch.long)}
        return float(count_step_flops(model, batch))

    by_tm = sorted(shapes, key=lambda s: s[2])
    if quick and len(by_tm) > 3:
        # Count three shapes, fit FLOPs/row = a + b*Tm + c*Tm^2 (linear layers + attention).
        picks = [by_tm[0], by_tm[len(by_tm) // 2], by_tm[-1]]
        per_row = [flops(*s) / s[0] for s in picks]
        coef = np.linalg.solve(np.array([[1.0, s[2], s[2] ** 2] for s in picks]), per_row)
        counted = {s: s[0] * float(coef @ [1.0, s[2], s[2] ** 2]) for s in shapes}
        how = "counted for 3 shapes, FLOPs/row fitted as a + b*Tm + c*Tm^2 for the rest (--quick)"
    else:
        counted = {s: flops(*s) for s in shapes}
        how = "counted for every shape"
    ms = {s: f / (MFU * PEAK_TFLOPS * 1e12) * 1e3 for s, f in counted.items()}
    info = {"source": "derived", "model_params": count_parameters(model),
            "formula": "step_ms = FLOPs(forward + loss + backward) / (MFU * peak) * 1e3",
            "flops": "torch.utils.flop_counter.FlopCounterMode on meta tensors of each (B, Tt, Tm); "
                     + how, "mfu_assumed": MFU, "peak_tflops": PEAK_TFLOPS,
            "peak_basis": PEAK_BASIS, "per_shape_ms": {str(s): round(v, 3) for s, v in ms.items()},
            "per_shape_tflop": {str(s): round(f / 1e12, 3) for s, f in counted.items()}}
    return ms, info


def simulate(loader, step_ms: dict, n: int) -> dict:
    """A consumer that holds each batch for its step time; returns input-bound %.

    The first batches run the same way but are not counted: worker start-up, and the loader
    filling its queues to the steady state a training run lives in. ``loader`` must be infinite."""
    it = loader.iter_compact()  # what the DevicePrefetcher takes on a GPU
    warm = max(20, n // 10)
    waits, t0, b = [], 0.0, None
    for k in range(warm + n):
        if k == warm:
            t0 = time.perf_counter()
        b = None  # the previous batch is freed by the "step", not counted as waiting
        w0 = time.perf_counter()
        b = next(it)
        waits.append(time.perf_counter() - w0)
        B, Tt = b["tokens"].shape
        Tm = b["mel"].shape[1] if "mel" in b else b["audio"].shape[1] // loader.dataset.hop
        time.sleep(step_ms[(B, Tt, Tm)] / 1e3)  # the "GPU" is busy
    wall = time.perf_counter() - t0
    it.close()
    w = np.array(waits[warm:]) * 1e3
    return {"input_bound_pct": float(100.0 * w.sum() / 1e3 / wall), "wait_s": float(w.sum() / 1e3),
            "wall_s": wall, "batches": n, "warm_up_batches": warm,
            "wait_ms": {"p50": float(np.percentile(w, 50)), "p99": float(np.percentile(w, 99)),
                        "max": float(w.max()), "batches_waiting_over_1ms": int((w > 1).sum())}}


# ------------------------------------------------------------------------------------ run


def padding_by_multiple(cache: Cache, cfg: Config) -> dict:
    out = {}
    for pm in sorted({1, 16, 32, 64, cfg.data.pad_multiple}):
        if pm % cfg.model.reduction == 0:
            s = BucketSampler.from_config(cache.n_frames, cache.n_tokens, cfg.data,
                                          cache.indices("train"), pad_multiple=pm,
                                          plan_indices=np.arange(len(cache)), seed=cfg.train.seed)
            rep = s.padding_report()
            out[pm] = {"mel_padding_pct": round(rep["mel_padding_pct"], 2),
                       "filler_pct": round(rep["filler_pct"], 2)}
    return out


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
        step_ms, step_info = step_times(cfg, cache, shapes, args.quick)
    weights = {s: sum(p.mel_len == s[2] and len(p.indices) == s[0] for p in sampler.plan()) for s in shapes}
    mean_ms = sum(step_ms[s] * w for s, w in weights.items()) / max(1, sum(weights.values()))

    # (a) naive: same workers, random batches of the cached plan's mean size
    naive_dl = DataLoader(NaiveDataset(cache, train), batch_size=max(1, round(mean_rows)),
                          shuffle=True, num_workers=workers, collate_fn=naive_collate,
                          persistent_workers=workers > 0,
                          prefetch_factor=cfg.data.prefetch_factor if workers else None)
    naive = measure(epochs(naive_dl), n_naive, warm_up=workers)
    naive["batch_size"] = naive_dl.batch_size
    del naive_dl
    # (b) cached, as the GPU path consumes it (compact) and as the float32 contract
    loader = make_loader(cache, cfg, "train", num_workers=workers)
    loader.sampler.infinite = True
    ahead = cfg.data.prefetch_factor * max(1, workers) + 2  # DataLoader queue + host thread
    cached = measure(loader.iter_compact(), n_cached, warm_up=ahead)
    cached["frames_per_s_float32"] = measure(iter(loader), n_cached // 2, warm_up=ahead)["frames_per_s"]
    # (c) the same loader feeding the simulated H100
    sim = simulate(loader, step_ms, n_sim)

    result = {
        "device": device_name(), "workers": workers, "config": args.config,
        "overrides": list(args.overrides), "cache": str(path),
        "corpus": {"train_utterances": int(train.size), "speakers": len(cache.speakers),
                   "train_minutes": round(float(cache.n_frames[train].sum()) * cache.audio_cfg.hop_length
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
            "padding_by_pad_multiple": padding_by_multiple(cache, cfg)},
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
