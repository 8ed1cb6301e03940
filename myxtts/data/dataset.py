"""Batches built from plans: each a few numpy slice copies per row, in a loader worker.

``BatchBuilder[plan]`` builds the whole batch a :class:`~myxtts.data.batch.BatchPlan`
describes (the sampler decides membership and shape; this only copies): tokens, lengths,
speaker and index here (and the reference's speaker embedding, where the model conditions on
one), the features by the run's :class:`~myxtts.data.features.Features`
strategy. It writes the worker form (see :mod:`myxtts.data.features`) into the loader's
shared-memory slot when the plan carries one (:mod:`myxtts.data.transport`).

Reference clip: ``ref_frames = ceil(ref_seconds * sr / hop)`` frames from ANOTHER utterance of
the same speaker (so the model must clone the voice, not copy the target), or from the
utterance itself when its speaker has no other one in the pool; crop start random. Both
choices are a pure function of (seed, epoch, index), so batches are reproducible and a resumed
run sees exactly what the uninterrupted one would have.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from myxtts.data.batch import Batch, BatchPlan
from myxtts.data.features import Features
from myxtts.data.sampler import round_up
from myxtts.data.transport import BatchError, SlotRef, empty
from myxtts.errors import UserError

_M = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, vectorised: a well-spread uint64 hash of each element."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & _M
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _M
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _M
    return x ^ (x >> np.uint64(31))


def hash_u64(seed: int, epoch: int, idx: np.ndarray, salt: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = _mix(np.full(idx.shape, (seed * 1_000_003 + salt) & 0xFFFFFFFFFFFFFFFF, np.uint64))
        h = _mix(h ^ np.uint64(epoch & 0xFFFFFFFFFFFFFFFF))
        return _mix(h ^ idx.astype(np.uint64))


def ref_frames_for(audio_cfg, ref_seconds: float) -> int:
    return math.ceil(ref_seconds * audio_cfg.sample_rate / audio_cfg.hop_length)


def ref_len_for(audio_cfg, ref_seconds: float, pad_multiple: int) -> int:
    """Tr: the frames every batch's reference clip is padded to."""
    return int(round_up(ref_frames_for(audio_cfg, ref_seconds), pad_multiple))


class ReferencePicker:
    """Chooses (reference utterance, crop offset, length) per row, vectorised over a batch."""

    def __init__(self, speaker: np.ndarray, n_frames: np.ndarray, pool: np.ndarray,
                 ref_frames: int, seed: int):
        self.speaker, self.n_frames = np.asarray(speaker), np.asarray(n_frames)
        self.ref_frames, self.seed = ref_frames, seed
        pool = np.asarray(pool, dtype=np.int64)
        self.members = pool[np.lexsort((pool, self.speaker[pool]))]  # grouped by speaker
        n_spk = int(self.speaker.max(initial=0)) + 1
        self.count = np.bincount(self.speaker[self.members], minlength=n_spk)
        self.start = np.concatenate([[0], np.cumsum(self.count)[:-1]])
        self.pos = np.full(len(self.speaker), -1, dtype=np.int64)  # position in members, or -1
        self.pos[self.members] = np.arange(len(self.members))

    def pick(self, idx: np.ndarray, epoch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self.speaker[idx]
        in_pool = self.pos[idx] >= 0
        others = self.count[s] - in_pool  # same-speaker utterances other than this one
        j = (hash_u64(self.seed, epoch, idx, 1) % np.maximum(others, 1).astype(np.uint64)).astype(np.int64)
        j = self.start[s] + j
        j += in_pool & (j >= self.pos[idx])  # skip the row's own utterance
        ref = np.where(others > 0, self.members[np.minimum(j, len(self.members) - 1)], idx)
        length = np.minimum(self.n_frames[ref], self.ref_frames)
        span = (self.n_frames[ref] - length + 1).astype(np.uint64)
        offset = (hash_u64(self.seed, epoch, idx, 2) % span).astype(np.int64)
        return ref, offset, length


class BatchBuilder(Dataset):
    """Map-style dataset whose keys are BatchPlans: the worker side of the batch path.

    ``ring`` (set by make_loader) is shared memory mapped before the workers fork; when a plan
    carries a slot, the batch is written there (memory reused batch after batch, so no fresh
    shared-memory pages to fault in, which costs more than the copying itself) and only a
    :class:`SlotRef` goes back through the DataLoader queue. Otherwise the :class:`Batch` does.
    """

    def __init__(self, cache, features: Features, *, ref_seconds: float = 3.0, pad_multiple: int = 64,
                 seed: int = 0, ref_pool=None, speaker_embeddings: np.ndarray | None = None):
        self.cache, self.features, self.seed = cache, features, seed
        self.speaker_embeddings = speaker_embeddings  # (N, 256) per utterance (data.embeddings)
        a = cache.audio_cfg
        self.ref_frames = ref_frames_for(a, ref_seconds)
        self.ref_len = ref_len_for(a, ref_seconds, pad_multiple)  # Tr
        pool = np.arange(len(cache)) if ref_pool is None else ref_pool
        self.refs = ReferencePicker(cache.index.speaker, cache.index.n_frames, pool, self.ref_frames, seed)
        self.ring = None
        self._tokens_ok = np.zeros(len(cache), dtype=bool)  # ids checked once per process

    def __getstate__(self):  # a spawned worker cannot share the ring; it allocates instead
        return {**self.__dict__, "ring": None}

    def layout(self, plan: BatchPlan) -> list[tuple[str, torch.dtype, tuple]]:
        """Every tensor of the plan's batch in worker form: (name, dtype, shape)."""
        B, Tt, Tm = plan.shape
        emb = self.speaker_embeddings
        return [("tokens", torch.int64, (B, Tt))] + self.features.layout(B, Tm, self.ref_len) + \
            [(k, torch.int64, (B,)) for k in ("token_lens", "mel_lens", "ref_lens", "speaker", "index")] + \
            ([("language", torch.int64, (B,))] if self.several_languages else []) + \
            ([("ref_emb", torch.float32, (B, emb.shape[1]))] if emb is not None else [])

    @property
    def several_languages(self) -> bool:
        """Whether the batches carry each sentence's language: for a model with a language table,
        whose rows the cache's languages are numbered as (:meth:`Cache.number_languages`)."""
        return len(self.cache.languages) > 1

    def __getitem__(self, plan: BatchPlan):
        try:
            return self._build(plan)
        except UserError as e:
            if get_worker_info() is None:
                raise
            return BatchError(str(e), plan)

    def _build(self, plan: BatchPlan) -> Batch | SlotRef:
        c, idx = self.cache, np.asarray(plan.indices, dtype=np.int64)
        n_tokens = c.index.n_tokens[idx]
        if c.index.n_frames[idx].max() > plan.mel_len or n_tokens.max() > plan.text_len:
            raise ValueError(f"batch plan shape (Tt={plan.text_len}, Tm={plan.mel_len}) is too "
                             "small for its rows")
        ref, ref_off, ref_lens = self.refs.pick(idx, plan.epoch)
        in_ring = plan.slot is not None and self.ring is not None
        out = self.ring.views(plan.slot, self.layout(plan)) if in_ring else \
            {k: empty(shape, dtype) for k, dtype, shape in self.layout(plan)}
        out["mel_lens"].numpy()[:] = self.features.fill(c, out, idx, ref, ref_off, ref_lens)
        tokens = out["tokens"].numpy()
        for b, i in enumerate(idx):
            ids = c.tokens(i)
            if not self._tokens_ok[i]:  # a corrupted byte makes an id the model has no embedding for
                if ids.size and (ids.min() < 0 or ids.max() >= len(c.vocab)):
                    raise c.corrupted(i, "tokens", "token ids outside the vocabulary")
                self._tokens_ok[i] = True
            tokens[b, :n_tokens[b]] = ids
            tokens[b, n_tokens[b]:] = 0
        for key, value in (("token_lens", n_tokens), ("ref_lens", ref_lens),
                           ("speaker", c.index.speaker[idx]), ("index", idx)):
            out[key].numpy()[:] = value
        if self.several_languages:
            out["language"].numpy()[:] = c.index.language[idx]
        if self.speaker_embeddings is not None:
            out["ref_emb"].numpy()[:] = self.speaker_embeddings[ref]  # (B, 256): the whole reference clip's
        return SlotRef(plan) if in_ring else Batch(plan, out)
