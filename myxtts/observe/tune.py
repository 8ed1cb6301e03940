"""``myxtts tune``: the largest frame budget that fits this GPU, and the fewest loader workers
that keep the step fed (batch sizing without trial and error).

1. Frame budget (GPU only). A candidate budget fits when one training step (forward, loss,
   backward, clipping, AdamW) of the sampler's largest bucket at that budget runs without
   ``torch.OutOfMemoryError`` and its peak reserved memory stays within ``HEADROOM`` of the
   device (the allocator fragments and a long run meets every shape). Search: from the configured
   budget, double while it fits, halve while it does not, then bisect to ``RESOLUTION``. After an
   OOM the gradients are dropped, the cache is emptied and the search goes on smaller. The step
   runs eagerly: compiling every candidate shape would take minutes each, and a compiled step
   needs no more memory than the eager one.
2. Loader workers. The step time is measured with the chosen budget and the configured compile
   mode (after one warm-up step per shape); the loader's time per batch is measured in-process
   and with candidate worker counts, and the fewest workers whose predicted input-bound share is
   below 1 % (the target in docs/design.md, "Input-bound"), with ``WORKER_MARGIN`` head-room, is chosen.

It writes a YAML overlay holding only the ``data:`` keys it decided, and the full merged config
next to it (the config loader takes one YAML), and prints the train command that uses it.
"""
from __future__ import annotations

import dataclasses
import gc
from pathlib import Path

import torch
import yaml

from myxtts.config import from_dict
from myxtts.observe import probes as R
from myxtts.observe.diagnose import INPUT_BOUND_TARGET_PCT, WORKER_MARGIN
from myxtts.train.batches import BucketBatches, largest_bucket
from myxtts.train.build import build_run
from myxtts.train.loop import warm_up
from myxtts.train.precision import sync

HEADROOM = 0.90        # peak reserved memory / device memory a candidate may reach
RESOLUTION = 0.05      # bisection stops when the bracket is this narrow (relative)
MAX_BUDGET = 1 << 22   # frames; a bound for the doubling
MIN_BUDGET = 64        # config minimum of data.frame_budget
STEP_TIMING_S = 20.0


def _with_data(cfg, **data):
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, **data))


# ----------------------------------------------------------------------------- frame budget
class MemoryProbe:
    """One eager step of the largest bucket at a candidate budget, on a model built once."""

    def __init__(self, cfg, data):
        self.rig = build_run(cfg, data, compile="off", with_batches=False)
        self.total = torch.cuda.get_device_properties(self.rig.device).total_memory
        self.trials: list[dict] = []

    def _step(self, cfg_b, sampler) -> None:
        bb = BucketBatches(self.rig.cache, cfg_b, self.rig.device)
        batch = bb.of_bucket(sampler, largest_bucket(sampler))
        self.rig.step_fn([batch])
        sync(self.rig.device)

    def fits(self, budget: int) -> tuple[bool, list]:
        from myxtts.data.loader import make_sampler

        cfg_b = _with_data(self.rig.cfg, frame_budget=budget)
        sampler = make_sampler(self.rig.cache, cfg_b, "train")
        big = sampler.buckets[largest_bucket(sampler)].shape
        dev = self.rig.device
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        oom = False
        try:
            self._step(cfg_b, sampler)
        except RuntimeError as e:  # torch.OutOfMemoryError, or cuBLAS/cuDNN failing to allocate
            if not isinstance(e, torch.OutOfMemoryError) and "ALLOC_FAILED" not in str(e):
                raise
            oom = True  # the failed step's tensors die with its frames; freed below
        self.rig.step_fn.opt.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.empty_cache()
        peak = torch.cuda.max_memory_reserved(dev) / self.total
        ok = not oom and peak <= HEADROOM
        self.trials.append({"frame_budget": budget, "largest_shape": list(big), "oom": oom,
                            "peak_pct": None if oom else 100.0 * peak, "fits": ok})
        return ok, sampler.shapes()

    def close(self) -> None:
        self.rig = None
        gc.collect()
        torch.cuda.empty_cache()


def search_budget(probe: MemoryProbe, start: int, say=print) -> tuple[int | None, str]:
    """Largest fitting frame budget, and a note on what bounded it."""
    def fits(b):
        ok, shapes = probe.fits(b)
        t = probe.trials[-1]
        say(f"  frame_budget={b}: largest batch {'x'.join(map(str, t['largest_shape']))} -> "
            + ("out of memory" if t["oom"] else f"peak {t['peak_pct']:.0f} % of memory")
            + ("" if ok else " (too big)"))
        return ok, shapes

    lo = hi = None
    ok, shapes = fits(start)
    note = f"bounded by GPU memory (peak <= {HEADROOM:.0%} of the device)"
    if ok:
        lo, cand = start, start * 2
        while cand <= MAX_BUDGET:
            ok, new = fits(cand)
            if not ok:
                hi = cand
                break
            if new == shapes:  # every bucket is at data.max_batch_size: more budget changes nothing
                note = "capped by data.max_batch_size (raise it to use more memory)"
                return lo, note
            lo, shapes, cand = cand, new, cand * 2
        else:
            return lo, f"stopped at {MAX_BUDGET} frames"
    else:
        hi, cand = start, start // 2
        while cand >= MIN_BUDGET:
            if fits(cand)[0]:
                lo = cand
                break
            hi, cand = cand, cand // 2
        if lo is None:
            return None, f"even data.frame_budget={MIN_BUDGET} does not fit: use a smaller model"
    while hi - lo > max(MIN_BUDGET, RESOLUTION * lo):
        mid = (lo + hi) // 2 // MIN_BUDGET * MIN_BUDGET
        if mid <= lo:
            break
        if fits(mid)[0]:
            lo = mid
        else:
            hi = mid
    return lo, note


# ---------------------------------------------------------------------------------- workers
def search_workers(cache, cfg, step_ms: float, say=print) -> tuple[int, list[dict], str]:
    """Fewest workers whose predicted input-bound % is below the target, with head-room."""
    cpus = R.usable_cpus()
    maxw = max(1, cpus - 1)
    tried: dict[int, dict] = {}

    def ok(w) -> bool:
        if w not in tried:
            r = R.loader_speed(cache, cfg, w, seconds=3.0)
            ms = r["ms_per_batch"] * (WORKER_MARGIN if w else 1.0)
            r["predicted_input_bound_pct"] = R.predicted_input_bound(ms, step_ms, w)
            tried[w] = r
            say(f"  data.num_workers={w}: {r['ms_per_batch']:.1f} ms/batch -> predicted input-bound "
                f"{r['predicted_input_bound_pct']:.2f} %")
        return tried[w]["predicted_input_bound_pct"] < INPUT_BOUND_TARGET_PCT

    if ok(0):
        return 0, list(tried.values()), "the training process builds batches fast enough by itself"
    w = min(maxw, R.workers_estimate(tried[0]["ms_per_batch"], step_ms, WORKER_MARGIN))
    if ok(w):
        while w > 1 and ok(w - 1):
            w -= 1
        return w, list(tried.values()), f"fewest workers below {INPUT_BOUND_TARGET_PCT:g} % input-bound"
    while w < maxw:
        w = min(maxw, max(w + 1, int(w * 1.5)))
        if ok(w):
            return w, list(tried.values()), f"fewest workers below {INPUT_BOUND_TARGET_PCT:g} % input-bound"
    best = min(tried, key=lambda k: (tried[k]["predicted_input_bound_pct"], k))
    return best, list(tried.values()), (f"no worker count up to {maxw} ({cpus} CPUs) reaches "
                                        f"{INPUT_BOUND_TARGET_PCT:g} %: the loader is CPU-limited here")


# -------------------------------------------------------------------------------------- run
def tune(cfg, data, out: str | Path = "tuned.yaml", say=print) -> dict:
    out = Path(out)
    merged_path = out.with_name(out.stem + ".merged.yaml")
    cuda = torch.cuda.is_available()
    decided: dict = {}
    res: dict = {"device": "cuda" if cuda else "cpu"}
    if cuda:
        say(f"frame budget: searching from data.frame_budget={cfg.data.frame_budget} "
            f"({torch.cuda.get_device_name(0)})")
        probe = MemoryProbe(cfg, data)
        budget, note = search_budget(probe, cfg.data.frame_budget, say)
        res["budget_trials"] = probe.trials
        probe.close()
        if budget is not None:
            decided["frame_budget"] = budget
            cfg = _with_data(cfg, frame_budget=budget)
        res["budget_note"] = note
    else:
        res["budget_note"] = (f"memory search does not apply on the CPU (it sizes data.frame_budget to "
                              f"GPU memory), so data.frame_budget stays {cfg.data.frame_budget}")
    say(res["budget_note"])

    say(f"step time: data.frame_budget={cfg.data.frame_budget}, train.compile={cfg.train.compile}, "
        "one warm-up step per shape")
    rig = build_run(cfg, data, with_batches=False)
    bb = BucketBatches(rig.cache, cfg, rig.device)
    warm_up(rig, bb=bb)
    st = R.time_steps(rig, 6, STEP_TIMING_S, bb)
    cache = rig.cache
    del rig, bb
    res["step_ms"] = st["step_ms"]
    say(f"  {st['step_ms']:,.1f} ms per step on the {'GPU' if cuda else 'CPU'} ({st['steps']} steps)")

    say("loader workers:")
    w, trials, why = search_workers(cache, cfg, st["step_ms"], say)
    decided["num_workers"] = w
    res.update(workers_trials=trials, workers_note=why)

    overlay = {"data": decided}
    merged = cfg.to_dict()
    merged["data"].update(decided)
    from_dict(merged)  # validates: what we write loads
    out.parent.mkdir(parents=True, exist_ok=True)
    head = (f"# written by `myxtts tune` on {'the GPU ' + torch.cuda.get_device_name(0) if cuda else 'the CPU'}; "
            f"measured step {st['step_ms']:.1f} ms\n")
    out.write_text(head + yaml.safe_dump(overlay, sort_keys=False))
    merged_path.write_text(head + yaml.safe_dump(merged, sort_keys=False))
    overrides = " ".join(f"data.{k}={v}" for k, v in decided.items())
    res.update(decided=decided, overlay=str(out), merged=str(merged_path),
               command=f"myxtts train --config {merged_path} --data {data} --out RUN")
    res["overrides"] = overrides
    return res
