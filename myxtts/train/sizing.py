"""Batches sized to the device: what ``data.frame_budget=auto`` resolves to, and the learning
rate that goes with it.

On a CUDA GPU, before anything else is built, the largest frame budget whose largest bucket
trains within ``HEADROOM`` of the memory free at the start is searched for: one eager step
(forward, loss, backward, clipping, AdamW) of the sampler's largest bucket at a candidate budget
fits when it raises no out-of-memory error and its peak reserved memory stays within the limit.
From ``data.base_frame_budget`` the budget doubles while it fits and halves while it does not,
then bisects to ``RESOLUTION``; at most ``MAX_TRIALS`` steps and ``TIME_LIMIT_S`` seconds, after
which the largest budget seen to fit is taken. The step runs eagerly: a compiled step needs no
more memory, and compiling each candidate would take minutes. Under DDP every rank measures its
own GPU and all take the smallest answer (the ranks must agree on the shapes).

Memory is not the only bound: the budget also leaves at least ``MIN_UPDATES`` optimizer updates
per epoch (at most ``frames of the corpus / (MIN_UPDATES x world size x grad_accum)``), so a
small corpus on a large GPU does not become a few giant batches whose learning rate sees three
updates an epoch; and it is halved while more than ``MAX_FILLER_PCT`` of an epoch's batch frames
would be filler rows (utterances repeated to fill a bucket's last batch). Neither bound takes
the budget below ``data.base_frame_budget``, the preset's own size.

``data.max_batch_size`` grows with the budget (``max_batch_size x budget / base_frame_budget``),
so on a large GPU memory, not the cap, bounds the batch, and a batch keeps the mix of lengths the
preset has at its base budget. On a CPU ``auto`` means ``data.base_frame_budget``: nothing is
measured and nothing changes.

Learning rate: ``train.lr`` is the rate for a batch of ``data.base_frame_budget`` frames. When
``auto`` picks budget B, the run uses ``train.lr x sqrt(B / base_frame_budget)``, at most
``MAX_LR_SCALE`` times ``train.lr`` (square-root scaling, the rule for Adam-type optimisers: the
gradient noise falls as 1/batch, so the step may grow as its square root). A budget set by hand
is taken with ``train.lr`` as given.

The budget chosen is part of the run's plan (train/plan.py); a resumed run reads it back instead
of measuring again, so it keeps the same shapes and the same rate.
"""
from __future__ import annotations

import dataclasses
import gc
import math
import time
from collections.abc import Callable

import torch

from myxtts.config import MIN_FRAME_BUDGET, Config
from myxtts.data.cache import Cache
from myxtts.data.sampler import bucket_plan, largest_bucket, make_sampler
from myxtts.errors import UserError
from myxtts.train.batches import BucketBatches
from myxtts.train.precision import sync

HEADROOM = 0.85        # peak reserved memory / memory free when the run starts
RESOLUTION = 0.05      # bisection stops when the bracket is this narrow (relative)
MAX_BUDGET = 1 << 22   # frames; a bound for the doubling
MAX_TRIALS = 12        # steps measured at most
TIME_LIMIT_S = 30.0    # sizing wall time at most (building the model included)
MAX_LR_SCALE = 2.0     # the square-root rule is capped: warm-up is not lengthened with it
MIN_UPDATES = 32       # optimizer updates per epoch at least
MAX_FILLER_PCT = 10.0  # filler rows, share of an epoch's batch frames, at most


def with_budget(cfg: Config, budget: int, scale_lr: bool = False) -> Config:
    """``cfg`` with ``data.frame_budget=budget``, the batch cap grown in proportion to the base
    budget, and (``scale_lr``) ``train.lr`` scaled by the square-root rule."""
    d, ratio = cfg.data, budget / cfg.data.base_frame_budget
    data = dataclasses.replace(d, frame_budget=int(budget),
                               max_batch_size=max(d.max_batch_size, math.ceil(d.max_batch_size * ratio)))
    train = cfg.train
    if scale_lr:
        train = dataclasses.replace(train, lr=train.lr * min(math.sqrt(ratio), MAX_LR_SCALE))
    return dataclasses.replace(cfg, data=data, train=train)


def corpus_cap(corpus_frames: int, base: int, per_update: int = 1) -> int:
    """The largest budget that leaves ``MIN_UPDATES`` updates per epoch of a corpus of
    ``corpus_frames`` when one update takes ``per_update`` batches (world size x grad_accum);
    never below ``base``."""
    return max(base, min(MAX_BUDGET, corpus_frames // (MIN_UPDATES * per_update)))


def within_filler(budget: int, base: int, filler_pct: Callable[[int], float]) -> int:
    """``budget`` halved while ``filler_pct(budget)`` exceeds ``MAX_FILLER_PCT``, down to ``base``."""
    while budget > base and filler_pct(budget) > MAX_FILLER_PCT:
        budget = max(base, budget // 2 // MIN_FRAME_BUDGET * MIN_FRAME_BUDGET)
    return budget


def search_budget(fits: Callable[[int], bool], start: int, *, max_budget: int = MAX_BUDGET,
                  max_trials: int = MAX_TRIALS, time_limit_s: float = TIME_LIMIT_S,
                  clock=time.monotonic, bound: str = "the largest budget searched") -> tuple[int | None, str]:
    """Largest budget ``fits`` accepts, searched from ``start`` up to ``max_budget`` (``bound``
    says what sets it), and a note on what bounded it. None when even ``MIN_FRAME_BUDGET`` does
    not fit."""
    t0, trials = clock(), 0

    def ok(b: int) -> bool:
        nonlocal trials
        trials += 1
        return fits(b)

    def out_of_time() -> bool:
        return trials >= max_trials or clock() - t0 >= time_limit_s

    note = f"bounded by GPU memory (peak <= {HEADROOM:.0%} of the memory free at the start)"
    limit = f"; search stopped after {max_trials} steps or {time_limit_s:g} s"
    if ok(start):
        lo, hi, cand = start, None, start * 2
        while cand <= max_budget:
            if out_of_time():
                return lo, note + limit
            if not ok(cand):
                hi = cand
                break
            lo, cand = cand, cand * 2
        else:
            if lo < max_budget and not out_of_time() and ok(max_budget):
                return max_budget, f"stopped at {max_budget} frames: {bound}"
            return lo, f"stopped below {max_budget} frames: {bound}"
    else:
        lo, hi, cand = None, start, start // 2
        while cand >= MIN_FRAME_BUDGET:
            if out_of_time():
                return None, f"nothing fitted before the search stopped ({max_trials} steps or {time_limit_s:g} s)"
            if ok(cand):
                lo = cand
                break
            hi, cand = cand, cand // 2
        if lo is None:
            return None, f"even data.frame_budget={MIN_FRAME_BUDGET} does not fit: use a smaller model"
    while hi - lo > max(MIN_FRAME_BUDGET, RESOLUTION * lo) and not out_of_time():
        mid = (lo + hi) // 2 // MIN_FRAME_BUDGET * MIN_FRAME_BUDGET
        if mid <= lo:
            break
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo, note


class MemoryProbe:
    """One eager step of the largest bucket at a candidate budget, on a run (built with
    ``train.compile=off`` and no batches) that is reused for every candidate. ``limit_bytes``:
    the peak reserved memory a candidate may reach."""

    def __init__(self, run, limit_bytes: int):
        self.run, self.limit = run, limit_bytes
        self.trials: list[dict] = []

    def fits(self, budget: int) -> bool:
        cfg_b = with_budget(self.run.cfg, budget)
        sampler = make_sampler(self.run.cache, cfg_b, "train")
        big = largest_bucket(sampler)
        dev = self.run.device
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        oom = False
        try:
            batch = BucketBatches(self.run.cache, cfg_b, dev).device_batch(bucket_plan(sampler, big))
            self.run.step_fn([batch.tensors])
            sync(dev)
        except RuntimeError as e:  # torch.OutOfMemoryError, or cuBLAS/cuDNN failing to allocate
            if not isinstance(e, torch.OutOfMemoryError) and "ALLOC_FAILED" not in str(e):
                raise
            oom = True  # the failed step's tensors die with its frames; freed below
        self.run.step_fn.opt.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.empty_cache()
        peak = torch.cuda.max_memory_reserved(dev)
        ok = not oom and peak <= self.limit
        self.trials.append({"frame_budget": budget, "largest_shape": list(sampler.buckets[big].shape),
                            "oom": oom, "peak_pct": None if oom else 100.0 * peak / self.limit * HEADROOM,
                            "fits": ok})
        return ok

    def close(self) -> None:
        self.run.close()
        self.run = None
        gc.collect()
        torch.cuda.empty_cache()


def free_memory(device: torch.device) -> int:
    """Bytes this process could allocate now: free on the device plus its own cached pool."""
    return int(torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device))


def describe(trial: dict) -> str:
    """One search step as a line: budget, largest batch, what it used."""
    return (f"frame_budget={trial['frame_budget']}: largest batch "
            f"{'x'.join(map(str, trial['largest_shape']))} -> "
            + ("out of memory" if trial["oom"] else f"peak {trial['peak_pct']:.0f} % of free memory")
            + ("" if trial["fits"] else " (too big)"))


def gpu_probe(build: Callable[[Config], object], device: torch.device) -> Callable[[Config], MemoryProbe]:
    """``probe`` for :func:`size_batches` on this GPU: ``build(cfg)`` makes the eager run without
    batches that is measured, against 85 % of the memory free before it was built."""
    def make(cfg: Config) -> MemoryProbe:
        free = free_memory(device)
        return MemoryProbe(build(cfg), int(HEADROOM * free))
    return make


def size_batches(cfg: Config, data, device: torch.device, info,
                 probe: Callable[[Config], MemoryProbe]) -> tuple[Config, str]:
    """Resolve ``data.frame_budget=auto``: the config to train with (budget, batch cap and
    learning rate) and a line saying what was chosen and why. ``probe(cfg)`` makes the object
    whose ``fits(budget)`` measures a candidate: :func:`gpu_probe` of the caller's builder (the
    sizing never builds a run itself); tests pass a fake. ``info``: the run's DistInfo."""
    d = cfg.data
    if d.frame_budget != "auto":
        return cfg, ""
    if device.type != "cuda":
        return with_budget(cfg, d.base_frame_budget), \
            f"data.frame_budget=auto: {d.base_frame_budget} (data.base_frame_budget; memory is sized on a GPU only)"
    t0 = time.perf_counter()
    made = probe(with_budget(cfg, d.base_frame_budget))
    corpus = Cache(data)
    cap = corpus_cap(int(corpus.index.n_frames.sum()), d.base_frame_budget, info.world_size * cfg.train.grad_accum)
    budget, why = search_budget(made.fits, d.base_frame_budget, max_budget=cap,
                                bound=f"at least {MIN_UPDATES} updates per epoch on this corpus",
                                time_limit_s=TIME_LIMIT_S - (time.perf_counter() - t0))
    if hasattr(made, "close"):
        made.close()
    if info.enabled:  # every rank must plan the same shapes: the smallest GPU decides
        t = torch.tensor(budget or 0, device=device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MIN)
        budget = int(t.item())
    if not budget:
        raise UserError(f"data.frame_budget=auto: {why}")
    fitted = budget
    budget = within_filler(budget, d.base_frame_budget, lambda b: make_sampler(
        corpus, with_budget(cfg, b), "train").padding_report()["filler_pct"])
    if budget < fitted:
        why += f"; halved from {fitted} to keep filler rows at most {MAX_FILLER_PCT:g} % of the batch frames"
    why += f"; sized in {time.perf_counter() - t0:.0f} s"
    sized = with_budget(cfg, budget, scale_lr=True)
    return sized, (f"data.frame_budget=auto: {budget} frames ({why}), data.max_batch_size "
                   f"{sized.data.max_batch_size}, train.lr {sized.train.lr:.3g} (square-root rule)")
