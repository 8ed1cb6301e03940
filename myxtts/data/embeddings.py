"""Speaker embeddings of a cache's clips, computed once and kept beside the cache.

``model.speaker_embedding=ge2e`` conditions the model on the GE2E embedding
(:mod:`myxtts.speaker_encoder`, an encoder trained for verification on thousands of voices) of each
reference clip. A clip's embedding never changes, so it is computed once per clip from the
cache's stored waveform and written to ``CACHE/speaker_embeddings.npy``, one row per utterance
in cache order; the loader's workers then copy rows as they copy mels, and the training step
costs the host nothing more. The file is written atomically (a reader sees none or all of it)
and is not part of the cache's checked structure: a cache without it is still whole, and the
first run that needs it computes it.
"""
from __future__ import annotations

import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np

from myxtts.data.cachedir import CacheDir
from myxtts.data.workers import hold_stop_signals, ignore_stop_signals
from myxtts.errors import UserError
from myxtts.files import atomic_write
from myxtts.speaker_encoder import DIM, shared_encoder


def path_of(cache) -> Path:
    return CacheDir(cache.path).embeddings


def _open(cache, mmap: bool) -> np.ndarray | None:
    p = path_of(cache)
    if not p.is_file():
        return None
    try:
        emb = np.load(p, mmap_mode="r" if mmap else None)
    except (OSError, ValueError) as e:
        raise UserError(f"{p}: unreadable ({e}); delete it and it is computed again") from None
    if emb.shape != (len(cache), DIM):
        raise UserError(f"{p}: holds {emb.shape[0]} embeddings of size {emb.shape[-1]} for "
                        f"{len(cache)} utterances; delete it and it is computed again")
    return emb


def load(cache) -> np.ndarray | None:
    """(N, DIM) float32 rows in cache order, or None when not computed yet. A file of another
    shape (a cache prepared again since) is refused with what to do."""
    emb = _open(cache, mmap=False)
    return None if emb is None else emb.astype(np.float32)


def row(cache, i: int) -> np.ndarray | None:
    """Utterance ``i``'s stored embedding (DIM,) float32, read alone; None when not computed."""
    emb = _open(cache, mmap=True)
    return None if emb is None else np.asarray(emb[i], dtype=np.float32)


CHUNK = 64  # clips per worker task


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)  # one process per core is the parallelism
    ignore_stop_signals(starting_slowly=True, own_group=True)


def _embed(job: tuple) -> tuple[int, np.ndarray]:
    """Clips ``lo:hi`` of the cache at ``path`` → (lo, (hi - lo, DIM) rows). In a worker."""
    from myxtts.data.cache import Cache

    path, lo, hi = job
    cache, encoder = Cache(path), shared_encoder()
    sr = cache.audio_cfg.sample_rate
    out = np.zeros((hi - lo, DIM), np.float32)
    for k, i in enumerate(range(lo, hi)):
        e = encoder.embed(cache.wav(i).astype(np.float32) / 32768.0, sr)
        if e is not None:  # no sound in it: the zero row, as the neutral voice has
            out[k] = e
    return lo, out


def ensure(cache, progress: bool = True, workers: int = 1) -> np.ndarray:
    """The cache's embeddings, computing and storing them first where they are missing, in
    ``workers`` processes (training passes one per usable core; 16-25 clips a second each on a
    2-core VM)."""
    emb = load(cache)
    if emb is not None:
        return emb
    from tqdm import tqdm

    if not cache.has_wav:
        raise UserError(f"{cache.path}: speaker embeddings are computed from the stored "
                        "waveforms; prepare with data.store_wav=true")
    shared_encoder()  # a missing encoder is one line here, before any worker starts
    workers = max(1, min(workers, -(-len(cache) // CHUNK)))
    print(f"speaker embeddings: computing the GE2E embedding of {len(cache)} clips once into "
          f"{path_of(cache)} ({workers} process{'es' if workers > 1 else ''})", file=sys.stderr)
    jobs = [(str(cache.path), lo, min(lo + CHUNK, len(cache))) for lo in range(0, len(cache), CHUNK)]
    out = np.zeros((len(cache), DIM), np.float32)
    bar = tqdm(total=len(cache), desc="embed", unit="clip", disable=not progress, file=sys.stderr)
    pool = None
    try:
        if workers > 1:  # spawned: a forked child of a process that ran torch can hang in OpenMP
            with hold_stop_signals(spawn=True):
                pool = mp.get_context("spawn").Pool(workers, initializer=_init_worker)
        for lo, rows in (pool.imap_unordered(_embed, jobs) if pool else map(_embed, jobs)):
            out[lo:lo + len(rows)] = rows
            bar.update(len(rows))
    finally:
        bar.close()
        if pool:
            pool.terminate()
    p = path_of(cache)
    with atomic_write(p) as tmp, open(tmp, "wb") as f:
        np.save(f, out.astype(np.float16))
    return load(cache)
