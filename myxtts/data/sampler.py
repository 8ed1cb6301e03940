"""Frame-budget bucket sampler: a small fixed set of batch shapes, DDP-aware, resumable.

Every utterance falls in one mel-length bucket. A bucket has ONE shape ``(B, Tt, Tm)``:
``Tm`` is its upper mel length (a multiple of ``pad_multiple``), ``Tt`` the longest text among
its members rounded up likewise, ``B`` how many ``Tm``-frame rows fit the frame budget. Every
batch of the bucket, its last included, has exactly that shape, so a run sees at most
``max_buckets`` shapes (``shapes()``) and every optimizer step sees a full batch.

Boundaries come from the length distribution: an exact dynamic programme over the rounded
lengths picks at most ``max_buckets`` boundaries that minimise padded frames (plus a small
charge for the filler rows below; plain quantiles pad far more on skewed corpora). They are planned over
``plan_indices`` (by default every utterance, train and val), so both splits share the shapes.

Budget (counted WITH padding): B * Tm <= frame_budget, B <= max_batch_size, and B >= 1 (one
utterance longer than the budget still trains).

Filler policy (no utterance lost): each epoch every utterance of the split is in exactly one
batch as a *real* row. A bucket's last batch, if short, is topped up with *filler* rows: other
utterances of the same bucket, taken from its earlier batches (so the shape and Tt still fit),
repeated only when the bucket has fewer members than one batch. Filler rows are real
utterances trained on a second time, not padding: a last batch of the rows left alone (tried:
filler 16 % -> 0 % of the demo corpus's frames at the base budget) gave steps of 2 rows at the
full learning rate and one more shape per bucket, and learned neither better nor worse per step
than another seed moves (benchmarks/results/2026-11-26-sampler-cpu.md). Under DDP the batch list is topped up
to a multiple of ``world_size`` with whole filler batches (copies of the first batches). A
plan's ``indices[:n_real]`` are the real rows; the rest are filler. ``padding_report()`` states
the filler share: about 1 % on corpora of thousands of utterances, far more on toy corpora
whose buckets hold less than one batch each.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from torch.utils.data import Sampler

from myxtts.data.batch import BatchPlan
from myxtts.errors import UserError

# A filler row is a real utterance seen a second time this epoch: it still trains the model,
# unlike a padded frame, so the bucket planner charges it a tenth of a padded frame.
FILLER_WEIGHT = 0.1


@dataclass(frozen=True)
class Bucket:
    mel_len: int  # Tm: padded mel frames of every batch in this bucket
    text_len: int  # Tt: padded tokens
    batch_size: int  # B

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.batch_size, self.text_len, self.mel_len)


def round_up(x, m: int):
    return -(-x // m) * m


def batch_size_for(mel_len: int, frame_budget: int, max_batch_size: int) -> int:
    return int(max(1, min(frame_budget // mel_len, max_batch_size)))


def plan_boundaries(mel_lens: np.ndarray, pad_multiple: int, max_buckets: int, frame_budget: int,
                    max_batch_size: int = 64) -> list[int]:
    """At most ``max_buckets`` bucket lengths (multiples of ``pad_multiple``) minimising the
    padded frames (+ FILLER_WEIGHT x filler frames) over one pass of ``mel_lens``."""
    lens = np.asarray(mel_lens, dtype=np.int64)
    if lens.size == 0:
        return []
    cands, inv = np.unique(round_up(lens, pad_multiple), return_inverse=True)
    m = len(cands)
    n_cum = np.concatenate([[0], np.cumsum(np.bincount(inv, minlength=m))])  # (m+1,)
    s_cum = np.concatenate([[0], np.cumsum(np.bincount(inv, weights=lens, minlength=m))])
    bs = np.array([batch_size_for(int(v), frame_budget, max_batch_size) for v in cands])
    # best[k, j]: least waste covering candidates [0, j) with k buckets; prev[k, j] the split.
    best = np.full((max_buckets + 1, m + 1), np.inf)
    prev = np.zeros((max_buckets + 1, m + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for k in range(1, max_buckets + 1):
        for j in range(1, m + 1):
            i = np.arange(j)  # bucket covers candidates [i, j) with length cands[j-1]
            n = n_cum[j] - n_cum[i]
            filler = (-n) % bs[j - 1]  # rows topping up the bucket's last batch
            pad = n * cands[j - 1] - (s_cum[j] - s_cum[i])
            cost = best[k - 1, :j] + pad + FILLER_WEIGHT * filler * cands[j - 1]
            prev[k, j] = int(np.argmin(cost))
            best[k, j] = cost[prev[k, j]]
    k = int(np.argmin(best[:, m]))
    out, j = [], m
    while j > 0:
        out.append(int(cands[j - 1]))
        j, k = int(prev[k, j]), k - 1
    return sorted(out)


class BucketSampler(Sampler):
    """Yields :class:`BatchPlan` items, one per batch of this rank's share of the epoch.

    ``mel_lens``/``text_lens`` are indexed by cache index (all utterances); ``indices`` is the
    split this sampler serves (default: all). With ``infinite=True`` iteration runs on into the
    next epochs with no gap (the loader never drains at an epoch boundary).
    """

    def __init__(self, mel_lens, text_lens, indices=None, *, frame_budget: int = 12000,
                 max_batch_size: int = 64, pad_multiple: int = 64, max_buckets: int = 8,
                 boundaries: list[int] | None = None, plan_indices=None, shuffle: bool = True,
                 seed: int = 0, rank: int = 0, world_size: int = 1, infinite: bool = False):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        self.mel_lens = np.asarray(mel_lens, dtype=np.int64)
        self.text_lens = np.asarray(text_lens, dtype=np.int64)
        self.indices = np.arange(len(self.mel_lens)) if indices is None else np.asarray(indices, np.int64)
        plan_idx = np.arange(len(self.mel_lens)) if plan_indices is None else np.asarray(plan_indices, np.int64)
        plan_idx = np.union1d(plan_idx, self.indices)  # every served utterance must have a bucket
        self.shuffle, self.seed, self.rank, self.world_size = shuffle, seed, rank, world_size
        self.infinite = infinite
        self.epoch, self._position, self._generation = 0, 0, 0
        self._cache: tuple[int, list] | None = None

        pm, lens = pad_multiple, self.mel_lens[plan_idx]
        if boundaries is None:
            bounds = plan_boundaries(lens, pm, max_buckets, frame_budget, max_batch_size)
        else:
            bounds = sorted({int(round_up(int(b), pm)) for b in boundaries})
            if lens.size and lens.max() > bounds[-1]:
                # Longer than the largest given bucket: one extra bucket (one more shape) for them.
                bounds.append(int(round_up(int(lens.max()), pm)))
        self.boundaries = np.asarray(bounds, dtype=np.int64)
        self.bucket_of = np.full(len(self.mel_lens), -1, dtype=np.int64)
        self.bucket_of[plan_idx] = np.searchsorted(self.boundaries, self.mel_lens[plan_idx])
        self.buckets: list[Bucket] = []
        for b, tm in enumerate(bounds):
            members = plan_idx[self.bucket_of[plan_idx] == b]
            tt = int(round_up(max(int(self.text_lens[members].max(initial=1)), 1), pm))
            self.buckets.append(Bucket(int(tm), tt, batch_size_for(int(tm), frame_budget, max_batch_size)))
        self.fingerprint = [len(self.mel_lens), len(self.indices), [b.shape for b in self.buckets]]

    @classmethod
    def from_config(cls, mel_lens, text_lens, data_cfg, indices=None, **kw) -> BucketSampler:
        d = data_cfg
        settings = dict(frame_budget=d.fixed_budget, max_batch_size=d.max_batch_size,
                        pad_multiple=d.pad_multiple, max_buckets=d.max_buckets)
        return cls(mel_lens, text_lens, indices, **{**settings, **kw})  # kw wins

    # ------------------------------------------------------------------------------ planning

    def global_plan(self, epoch: int) -> list[BatchPlan]:
        """Every batch of ``epoch`` over all ranks, in order (rank r takes items r, r+W, ...)."""
        rng = np.random.default_rng([self.seed, epoch])
        batches = []
        for b, bucket in enumerate(self.buckets):
            members = self.indices[self.bucket_of[self.indices] == b]
            if members.size == 0:
                continue
            if self.shuffle:
                members = rng.permutation(members)
            size, n = bucket.batch_size, members.size
            # Filler comes from the front (earlier batches); it repeats only if the bucket has
            # fewer members than one batch.
            rows = np.concatenate([members, np.resize(members, (-n) % size)])
            for s in range(0, rows.size, size):
                part = rows[s:s + size]
                batches.append(BatchPlan(part, min(size, n - s), bucket.mel_len, bucket.text_len, epoch,
                                         b, int(self.mel_lens[part].sum())))
        order = rng.permutation(len(batches)) if self.shuffle else np.arange(len(batches))
        extra = np.resize(order, (-len(batches)) % self.world_size) if batches else order[:0]
        plan = [batches[i] for i in order]
        plan += [batches[i]._replace(n_real=0) for i in extra]  # whole filler batches for DDP
        return plan

    def plan(self, epoch: int | None = None) -> list[BatchPlan]:
        """This rank's batches for ``epoch`` (default: the current one)."""
        epoch = self.epoch if epoch is None else epoch
        if self._cache is None or self._cache[0] != epoch:
            self._cache = (epoch, self.global_plan(epoch)[self.rank::self.world_size])
        return self._cache[1]

    def __len__(self) -> int:
        """Batches per rank per epoch (the same for every rank and every epoch)."""
        n = sum(-(-int((self.bucket_of[self.indices] == b).sum()) // bk.batch_size)
                for b, bk in enumerate(self.buckets))
        return -(-n // self.world_size)

    def __iter__(self):
        self._generation += 1
        me = self._generation  # a newer iterator retires this one: no stale position updates
        while True:
            plan = self.plan()
            while self._position < len(plan):
                self._position += 1
                yield plan[self._position - 1]
                if self._generation != me:
                    return
            self._position = 0
            if not self.infinite:
                return
            self.epoch += 1

    # ------------------------------------------------------------------------- epoch, resume

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its beginning; a no-op for the epoch already set (so calling it
        after :meth:`load_state_dict` keeps the restored position)."""
        if epoch != self.epoch:
            self.epoch, self._position = int(epoch), 0

    def seek(self, epoch: int, position: int) -> None:
        """Make the next iteration start at batch ``position`` of ``epoch`` (at most its end)."""
        self.epoch, self._position = int(epoch), min(int(position), len(self))

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self._position, "seed": self.seed,
                "world_size": self.world_size, "fingerprint": self.fingerprint}

    def load_state_dict(self, state: dict) -> None:
        """Continue where :meth:`state_dict` left off. Strict: every key is read and a missing or
        unknown one is an error naming it, so a state from another version is never half-read.
        Other data, settings or seed restart the epoch (with a warning); another world size
        continues from the same global position."""
        def other_version(what: str) -> UserError:
            return UserError(f"the data sampler state {what}; it was written by another version. "
                             "Start a new --out")

        state = dict(state)  # keys are popped; the caller's copy stays whole
        missing = [k for k in ("epoch", "position", "seed", "world_size", "fingerprint") if k not in state]
        if missing:
            raise other_version("lacks " + ", ".join(map(repr, missing)))
        epoch, pos = int(state.pop("epoch")), int(state.pop("position"))
        seed, world_size, fingerprint = state.pop("seed"), int(state.pop("world_size")), state.pop("fingerprint")
        if state:
            raise other_version("has unknown " + ", ".join(map(repr, state)))
        if fingerprint != self.fingerprint or seed != self.seed:
            warnings.warn("data sampler state is from other data or settings (cache, split, "
                          "frame budget or seed changed); restarting the epoch from its start",
                          stacklevel=2)
            pos = 0
        elif world_size != self.world_size:
            # Same global plan, other rank count: continue from the same global position
            # (at most world_size batches are seen again).
            pos = pos * world_size // self.world_size
        self.seek(epoch, pos)

    # ---------------------------------------------------------------------------- reporting

    def shapes(self) -> list[tuple[int, int, int]]:
        """Every (B, Tt, Tm) this sampler can emit: one per bucket."""
        return [b.shape for b in self.buckets]

    def padding_report(self, epoch: int | None = None) -> dict:
        """Shares of one epoch's batch frames (all ranks) spent on padding and filler, in %."""
        plan = self.global_plan(self.epoch if epoch is None else epoch)
        slots = sum(len(p.indices) * p.mel_len for p in plan)
        frames = sum(int(self.mel_lens[p.indices].sum()) for p in plan)
        real = sum(int(self.mel_lens[p.indices[:p.n_real]].sum()) for p in plan)
        tslots = sum(len(p.indices) * p.text_len for p in plan)
        tokens = sum(int(self.text_lens[p.indices].sum()) for p in plan)
        pct = lambda a, b: 100.0 * a / b if b else 0.0  # noqa: E731
        return {"mel_padding_pct": pct(slots - frames, slots),
                "text_padding_pct": pct(tslots - tokens, tslots),
                "filler_pct": pct(frames - real, slots), "batches": len(plan),
                "frames_per_epoch": real, "shapes": self.shapes()}

    @property
    def padding_pct(self) -> float:
        """Padded mel frames over all batch frames of the current epoch, in %."""
        return self.padding_report()["mel_padding_pct"]


def make_sampler(cache, cfg, split: str = "train", *, rank: int = 0, world_size: int = 1,
                 seed: int | None = None, shuffle: bool | None = None, **settings) -> BucketSampler:
    """A split's sampler over a cache. Shapes are planned over ALL utterances (train + val), so
    both splits share them. ``settings`` override ``cfg.data``'s (``pad_multiple=...``)."""
    return BucketSampler.from_config(
        cache.index.n_frames, cache.index.n_tokens, cfg.data, cache.indices(split),
        plan_indices=np.arange(len(cache)), shuffle=(split == "train") if shuffle is None else shuffle,
        seed=cfg.train.seed if seed is None else seed, rank=rank, world_size=world_size, **settings)


# ------------------------------------------------------------------------- planning by bucket

def bucket_plan(sampler: BucketSampler, b: int, epoch: int = 0) -> BatchPlan:
    """A full batch of bucket ``b``'s shape from its own members (repeated if it has fewer)."""
    bk = sampler.buckets[b]
    members = np.flatnonzero(sampler.bucket_of == b)
    if members.size == 0:
        members = np.flatnonzero(sampler.bucket_of >= 0)[:1]
    rows = np.resize(members, bk.batch_size)
    return BatchPlan(rows, min(members.size, bk.batch_size), bk.mel_len, bk.text_len, epoch, b,
                     int(sampler.mel_lens[rows].sum()))


def shape_plans(sampler: BucketSampler) -> list[BatchPlan]:
    """One plan per shape of ``sampler.shapes()``, in its order: the first batch of that shape in
    epoch 0 (real rows), or a bucket's full batch from its members where the split has none."""
    first: dict = {}
    for p in sampler.global_plan(0):
        first.setdefault(p.shape, p)
    full = {bk.shape: b for b, bk in enumerate(sampler.buckets)}
    return [first.get(shape) or bucket_plan(sampler, full[shape]) for shape in sampler.shapes()]


def largest_bucket(sampler: BucketSampler) -> int:
    """The bucket whose batch needs the most memory: most padded frames, then longest rows
    (attention grows with length)."""
    return max(range(len(sampler.buckets)),
               key=lambda b: (sampler.buckets[b].batch_size * sampler.buckets[b].mel_len,
                              sampler.buckets[b].mel_len, sampler.buckets[b].text_len))
