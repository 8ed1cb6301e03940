"""Batches from the packed cache: slice memory maps into preallocated padded arrays.

``CachedBatches[plan]`` builds the whole batch described by a :class:`BatchPlan` (the sampler
decides membership and shape; this only copies). No decoding, no DSP: per row it is a few
numpy slice assignments out of the shard memory maps, which the page cache serves after the
first epoch. For a GPU consumer workers write the compact form (float16 mels, int16 waveforms,
exactly as cached) and :func:`widen` turns it into the contract below on the device; for a
plain iteration (``plan.wide``) they write the contract form directly.

Batch contract (CPU tensors, one bucket shape per batch)::

    tokens     (B, Tt)          int64, 0-padded
    token_lens (B,)             int64
    mel        (B, Tm, n_mels)  float32, padded with MEL_PAD = log(LOG_FLOOR)
    mel_lens   (B,)             int64
    ref_mel    (B, Tr, n_mels)  float32, MEL_PAD-padded; Tr fixed for the run
    ref_lens   (B,)             int64
    speaker    (B,)             int64
    index      (B,)             int64 cache index (ids: cache.ids[index]); a repeated index
                                within an epoch is a filler row (see sampler.py)
    wav        (B, Tm * hop)    float32 in [-1, 1], only with ``with_wav=True``

Reference clip: ``ref_frames = ceil(ref_seconds * sr / hop)`` frames from ANOTHER utterance of
the same speaker (so the model must clone the voice, not copy the target), or from the
utterance itself when its speaker has no other one in the pool; crop start random. Both
choices are a pure function of (seed, epoch, index), so batches are reproducible and a resumed
run sees exactly what the uninterrupted one would have.
"""
from __future__ import annotations

import collections
import math
import mmap
import threading
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from myxtts.audio import LOG_FLOOR
from myxtts.data.sampler import BatchPlan, round_up
from myxtts.errors import UserError

MEL_PAD = math.log(LOG_FLOOR)  # the mel value of digital silence; padding must look like it

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


def empty(shape, dtype: torch.dtype) -> torch.Tensor:
    """Uninitialised tensor; in a loader worker allocated in shared memory (no copy on send)."""
    if get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    elem = torch.empty(0, dtype=dtype)
    storage = elem._typed_storage()._new_shared(math.prod(shape), device="cpu")
    return elem.new(storage).resize_(*shape)


class SlotRing:
    """Batch-sized slots of anonymous shared memory, mapped before the workers fork.

    Writing a batch into memory that was already written before costs a plain memcpy; writing
    into a fresh shared-memory segment (what DataLoader workers normally do, one per tensor per
    batch) first faults in and zeroes every page, several times slower on a VM. The sampler side
    acquires a slot per dispatched batch, the consumer side releases it once copied out; when
    none is free (never, with n_slots > batches in flight) the batch falls back to fresh memory.
    """

    ALIGN = 64

    def __init__(self, n_slots: int, slot_bytes: int):
        self.n_slots, self.slot_bytes = n_slots, int(round_up(max(slot_bytes, 1), 4096))
        self.buf = mmap.mmap(-1, n_slots * self.slot_bytes)  # MAP_SHARED | MAP_ANONYMOUS
        self._free = collections.deque(range(n_slots))
        self._lock = threading.Lock()

    @classmethod
    def nbytes(cls, layout) -> int:
        return sum(round_up(math.prod(shape) * _itemsize(dt), cls.ALIGN) for _, dt, shape in layout)

    def views(self, slot: int, layout) -> dict[str, torch.Tensor]:
        out, offset = {}, slot * self.slot_bytes
        for name, dtype, shape in layout:
            n = math.prod(shape)
            out[name] = torch.frombuffer(self.buf, dtype=dtype, count=n, offset=offset).view(shape)
            offset += round_up(n * _itemsize(dtype), self.ALIGN)
        return out

    def acquire(self) -> int | None:
        with self._lock:
            return self._free.popleft() if self._free else None

    def release(self, slot: int) -> None:
        with self._lock:
            self._free.append(slot)

    def reset(self) -> None:
        with self._lock:
            self._free = collections.deque(range(self.n_slots))


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty(0, dtype=dtype).element_size()


class SlotRef(NamedTuple):
    """A worker's answer when it wrote the batch into a slot of the loader's ring."""
    plan: BatchPlan


class BatchError(NamedTuple):
    """A worker's answer when the batch cannot be built for a reason the user can fix. The
    loader raises it as a UserError in the main process: a DataLoader would re-raise the
    worker's exception with the worker's traceback pasted into its message."""
    message: str
    plan: BatchPlan


def widen(batch: dict) -> dict:
    """Compact batch (as workers write it) → batch contract. Works on CPU or device tensors.

    Workers ship mels as float16 (the cache's own precision, so nothing is lost) and waveforms
    as int16: half the bytes through shared memory, pinning and PCIe. Here they become float32,
    with the padding set to exactly MEL_PAD (float16 cannot hold log(1e-5) exactly)."""
    out = dict(batch)
    for key, lens in (("mel", "mel_lens"), ("ref_mel", "ref_lens")):
        x = batch.get(key)
        if x is not None and x.dtype != torch.float32:
            pad = torch.arange(x.shape[1], device=x.device)[None, :] >= batch[lens][:, None]  # (B, T)
            if x.is_cuda:
                out[key] = x.float().masked_fill_(pad[..., None], MEL_PAD)  # (B, T, n_mels)
            else:  # numpy: one thread (see single_threaded_copy)
                y = x.numpy().astype(np.float32)
                y[pad.numpy()] = MEL_PAD
                out[key] = torch.from_numpy(y)
    if "wav" in batch and batch["wav"].dtype == torch.int16:
        w = batch["wav"]  # (B, Tm * hop)
        out["wav"] = w.float().mul_(1.0 / 32768) if w.is_cuda else \
            torch.from_numpy(np.multiply(w.numpy(), np.float32(1.0 / 32768), dtype=np.float32))
    return out


def single_threaded_copy(v: torch.Tensor, pin: bool = False) -> torch.Tensor:
    """A CPU copy of ``v`` in memory of its own (pinned if asked), made by numpy.

    numpy copies on the calling thread. torch splits a large copy over its intra-op pool, and
    when another process holds one of the cores (loader workers, a shared machine) the whole
    copy waits for the descheduled thread: 16 ms instead of 0.8 ms for 4 MB on 2 busy cores."""
    dst = torch.empty(v.shape, dtype=v.dtype, pin_memory=pin)
    np.copyto(dst.numpy(), v.numpy())
    return dst


class CachedBatches(Dataset):
    """Map-style dataset whose keys are :class:`BatchPlan` items from a BucketSampler.

    ``ring`` (set by make_loader) is shared memory mapped before the workers fork; when a plan
    carries a slot, the batch is written there (memory reused batch after batch, so no fresh
    shared-memory pages to fault in, which costs more than the copying itself) and only a
    :class:`SlotRef` goes back through the DataLoader queue. Otherwise a tensor dict does.
    Features are float32 when ``plan.wide``, else compact (see :func:`widen`).
    """

    def __init__(self, cache, *, ref_seconds: float = 3.0, pad_multiple: int = 64, seed: int = 0,
                 ref_pool=None, with_wav: bool = False):
        self.cache, self.with_wav, self.seed = cache, with_wav, seed
        a = cache.audio_cfg
        self.n_mels, self.hop = a.n_mels, a.hop_length
        self.ref_frames = ref_frames_for(a, ref_seconds)
        self.ref_len = ref_len_for(a, ref_seconds, pad_multiple)  # Tr
        pool = np.arange(len(cache)) if ref_pool is None else ref_pool
        self.refs = ReferencePicker(cache.speaker, cache.n_frames, pool, self.ref_frames, seed)
        self.ring = None
        self._stage: np.ndarray | None = None  # float16 staging rows for wide batches
        # Utterances whose mel this process has seen to be finite: each is checked the first
        # time it is read (the shards do not change under a run), so later epochs pay nothing.
        self._finite = np.zeros(len(cache), dtype=bool)
        self._tokens_ok = np.zeros(len(cache), dtype=bool)  # the same, for token ids
        if with_wav and not cache.has_wav:
            cache.wav(0)  # raises the cache's clear "prepare with data.store_wav=true" error

    def __getstate__(self):  # a spawned worker cannot share the ring; it allocates instead
        state = self.__dict__.copy()
        state["ring"] = None
        return state

    def layout(self, plan: BatchPlan) -> list[tuple[str, torch.dtype, tuple]]:
        B, Tt, Tm = len(plan.indices), plan.text_len, plan.mel_len
        feat = torch.float32 if plan.wide else torch.float16
        out = [("tokens", torch.int64, (B, Tt)), ("mel", feat, (B, Tm, self.n_mels)),
               ("ref_mel", feat, (B, self.ref_len, self.n_mels))]
        if self.with_wav:
            out.append(("wav", torch.float32 if plan.wide else torch.int16, (B, Tm * self.hop)))
        return out + [(k, torch.int64, (B,)) for k in
                      ("token_lens", "mel_lens", "ref_lens", "speaker", "index")]

    def _alloc(self, plan: BatchPlan) -> dict[str, torch.Tensor]:
        if plan.slot is not None and self.ring is not None:
            return self.ring.views(plan.slot, self.layout(plan))
        return {k: empty(shape, dtype) for k, dtype, shape in self.layout(plan)}

    def _fill_mel(self, dst: torch.Tensor, idx, start, length) -> None:
        """dst[b, :length[b]] = mel(idx[b])[start[b]:][:length[b]]; the rest MEL_PAD."""
        wide = dst.dtype == torch.float32
        if wide:  # rows are gathered as float16 (memcpy) and widened in one vectorised pass
            n = dst.numel()
            if self._stage is None or self._stage.size < n:
                self._stage = np.empty(n, dtype=np.float16)
            rows = self._stage[:n].reshape(dst.shape)
        else:
            rows = dst.numpy()
        for b in range(rows.shape[0]):
            o, n, i = start[b], length[b], idx[b]
            mel = self.cache.mel(i)  # (n_frames, n_mels) float16 memory map
            if not self._finite[i]:
                self._check_finite(i, mel)
            rows[b, :n] = mel[o:o + n]  # float16 → float16: a memcpy
            rows[b, n:] = MEL_PAD
        if wide:
            if get_worker_info() is not None:  # torch: SIMD, and one thread in a worker
                dst.copy_(torch.from_numpy(rows))
            else:  # numpy: never waits on torch's intra-op pool (see single_threaded_copy)
                np.copyto(dst.numpy(), rows)
            out = dst.numpy()
            for b in range(out.shape[0]):
                out[b, length[b]:] = MEL_PAD  # exact in float32

    def _check_finite(self, i: int, mel: np.ndarray) -> None:
        """A corrupted shard byte can make a float16 inf or NaN, which would train on
        silently to a NaN loss: stop with the shard's name instead."""
        if not np.isfinite(mel).all():
            raise self._corrupted(i, "mel", "non-finite mel values")
        self._finite[i] = True

    def _check_tokens(self, i: int, tokens: np.ndarray) -> None:
        """A corrupted byte in tokens.npy makes an id the model has no embedding for."""
        if tokens.size and (tokens.min() < 0 or tokens.max() >= len(self.cache.vocab)):
            raise self._corrupted(i, "tokens", "token ids outside the vocabulary")
        self._tokens_ok[i] = True

    def _corrupted(self, i: int, name: str, what: str) -> UserError:
        c = self.cache
        return UserError(f"{c.shard_file(i, name)}: utterance {c.ids[i]} has {what} (the shard is "
                         f"corrupted); run `myxtts cache verify {c.path} --fix`")

    def _finish(self, out: dict, plan: BatchPlan, idx, n_tokens, ref_lens):
        c = self.cache
        tokens = out["tokens"].numpy()
        for b, i in enumerate(idx):
            ids = c.tokens(i)
            if not self._tokens_ok[i]:
                self._check_tokens(i, ids)
            tokens[b, :n_tokens[b]] = ids
            tokens[b, n_tokens[b]:] = 0
        for key, value in (("token_lens", n_tokens), ("ref_lens", ref_lens),
                           ("speaker", c.speaker[idx]), ("index", idx)):
            out[key].numpy()[:] = value
        return SlotRef(plan) if plan.slot is not None and self.ring is not None else out

    def __getitem__(self, plan: BatchPlan):
        try:
            return self._build(plan)
        except UserError as e:
            if get_worker_info() is None:
                raise
            return BatchError(str(e), plan)

    def _build(self, plan: BatchPlan):
        c, idx = self.cache, np.asarray(plan.indices, dtype=np.int64)
        n_frames, n_tokens = c.n_frames[idx], c.n_tokens[idx]
        if n_frames.max() > plan.mel_len or n_tokens.max() > plan.text_len:
            raise ValueError(f"batch plan shape (Tt={plan.text_len}, Tm={plan.mel_len}) is too "
                             "small for its rows")
        ref, ref_off, ref_lens = self.refs.pick(idx, plan.epoch)
        out = self._alloc(plan)
        self._fill_mel(out["mel"], idx, np.zeros_like(idx), n_frames)  # (B, Tm, M)
        self._fill_mel(out["ref_mel"], ref, ref_off, ref_lens)  # (B, Tr, M)
        out["mel_lens"].numpy()[:] = n_frames
        if self.with_wav:
            wav = out["wav"].numpy()  # (B, Tm * hop) int16, or float32 when wide
            for b, i in enumerate(idx):
                w = c.wav(i)[: wav.shape[1]]
                if plan.wide:
                    np.multiply(w, np.float32(1 / 32768), out=wav[b, :w.size], casting="unsafe")
                else:
                    wav[b, :w.size] = w
                wav[b, w.size:] = 0
        return self._finish(out, plan, idx, n_tokens, ref_lens)
