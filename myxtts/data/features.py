"""Where a batch's features come from: one strategy object, chosen once per run.

A :class:`Features` strategy does the two halves of the feature work, in the two places the
batch path has (lhotse's input strategies are the model):

- ``fill`` runs in a loader worker and writes the *worker form*: as few bytes as carry the
  information, because they cross shared memory, pinning and PCIe;
- ``finish`` runs where the batch lands (on the GPU after its copy; on a CPU-trained run in the
  loader's host thread) and turns the worker form into the batch contract below.

:class:`CachedMels` slices the cache's float16 mels (``prepare`` did the DSP once);
:class:`DecodedAudio` (``data.on_the_fly=true``, for corpora too large to cache as mels) decodes
the source audio in the workers and computes the mels in one batched STFT on the device. The
sampler, the references and resume are the same for both: planning uses the cache's lengths.

Batch contract (what the step reads; one bucket shape per batch)::

    tokens     (B, Tt)          int64, 0-padded
    token_lens (B,)             int64
    mel        (B, Tm, n_mels)  float32, padded with MEL_PAD = log(LOG_FLOOR)
    mel_lens   (B,)             int64
    ref_mel    (B, Tr, n_mels)  float32, MEL_PAD-padded; Tr fixed for the run
    ref_lens   (B,)             int64
    speaker    (B,)             int64
    index      (B,)             int64 cache index (ids: cache.index.id[index]); a repeated index
                                within an epoch is a filler row (see sampler.py)
    wav        (B, Tm * hop)    float32 in [-1, 1], only with ``with_wav=True``

Worker forms: CachedMels writes ``mel``/``ref_mel`` as float16 (the cache's own precision, so
nothing is lost) and ``wav`` as int16; DecodedAudio writes ``audio`` (B, Tm * hop) and
``ref_audio`` (B, Tr * hop) as int16 instead of any mel.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from myxtts.audio import LOG_FLOOR, AudioError, MelSpectrogram, load_audio, preprocess
from myxtts.data.manifest import PSEUDO
from myxtts.errors import UserError

MEL_PAD = math.log(LOG_FLOOR)  # the mel value of digital silence; padding must look like it

Layout = list[tuple[str, torch.dtype, tuple]]  # (name, dtype, shape) of each worker tensor


class Features:
    """The strategy's interface (see the module docstring)."""

    def __init__(self, cache, with_wav: bool):
        a = cache.audio_cfg
        self.n_mels, self.hop, self.with_wav = a.n_mels, a.hop_length, with_wav

    def layout(self, B: int, Tm: int, Tr: int) -> Layout:
        raise NotImplementedError

    def fill(self, cache, out: dict, idx, ref, ref_off, ref_lens) -> np.ndarray:
        """Write this strategy's tensors of ``out`` for rows ``idx`` (each with reference clip
        ``ref[b][ref_off[b]:][:ref_lens[b]]``; ``ref_lens`` may be shortened in place). Returns
        the rows' mel lengths."""
        raise NotImplementedError

    def finish(self, batch: dict) -> dict:
        """Worker form → batch contract, on whatever device ``batch`` is."""
        raise NotImplementedError


class CachedMels(Features):
    """Features sliced out of the cache's memory maps: a few memcpys per row."""

    def __init__(self, cache, with_wav: bool):
        super().__init__(cache, with_wav)
        if with_wav and not cache.has_wav:
            cache.wav(0)  # raises the cache's clear "prepare with data.store_wav=true" error
        # Utterances whose mel this process has seen to be finite: each is checked the first
        # time it is read (the shards do not change under a run), so later epochs pay nothing.
        self._finite = np.zeros(len(cache), dtype=bool)

    def layout(self, B: int, Tm: int, Tr: int) -> Layout:
        out = [("mel", torch.float16, (B, Tm, self.n_mels)), ("ref_mel", torch.float16, (B, Tr, self.n_mels))]
        return out + ([("wav", torch.int16, (B, Tm * self.hop))] if self.with_wav else [])

    def fill(self, cache, out: dict, idx, ref, ref_off, ref_lens) -> np.ndarray:
        n_frames = cache.index.n_frames[idx]
        self._fill_mel(cache, out["mel"].numpy(), idx, np.zeros_like(idx), n_frames)  # (B, Tm, M)
        self._fill_mel(cache, out["ref_mel"].numpy(), ref, ref_off, ref_lens)  # (B, Tr, M)
        if self.with_wav:
            wav = out["wav"].numpy()  # (B, Tm * hop) int16
            for b, i in enumerate(idx):
                w = cache.wav(i)[: wav.shape[1]]
                wav[b, :w.size] = w
                wav[b, w.size:] = 0
        return n_frames

    def _fill_mel(self, cache, rows: np.ndarray, idx, start, length) -> None:
        """rows[b, :length[b]] = mel(idx[b])[start[b]:][:length[b]]; the rest MEL_PAD."""
        for b in range(rows.shape[0]):
            o, n, i = start[b], length[b], idx[b]
            mel = cache.mel(i)  # (n_frames, n_mels) float16 memory map
            if not self._finite[i]:
                # A corrupted shard byte can make a float16 inf or NaN, which would train on
                # silently to a NaN loss: stop with the shard's name instead.
                if not np.isfinite(mel).all():
                    raise cache.corrupted(i, "mel", "non-finite mel values")
                self._finite[i] = True
            rows[b, :n] = mel[o:o + n]  # float16 → float16: a memcpy
            rows[b, n:] = MEL_PAD

    def finish(self, batch: dict) -> dict:
        return widen(batch)


def widen(batch: dict) -> dict:
    """CachedMels' worker form → batch contract: float16 mels and int16 waveforms become
    float32, with the padding set to exactly MEL_PAD (float16 cannot hold log(1e-5) exactly).
    Works on CPU or device tensors; tensors already float32 pass through."""
    out = dict(batch)
    for key, lens in (("mel", "mel_lens"), ("ref_mel", "ref_lens")):
        x = batch.get(key)
        if x is not None and x.dtype != torch.float32:
            pad = torch.arange(x.shape[1], device=x.device)[None, :] >= batch[lens][:, None]  # (B, T)
            if x.is_cuda:
                out[key] = x.float().masked_fill_(pad[..., None], MEL_PAD)  # (B, T, n_mels)
            else:  # numpy: one thread (torch would wait on its intra-op pool, see transport.py)
                y = x.numpy().astype(np.float32)
                y[pad.numpy()] = MEL_PAD
                out[key] = torch.from_numpy(y)
    if "wav" in batch and batch["wav"].dtype == torch.int16:
        w = batch["wav"]  # (B, Tm * hop)
        out["wav"] = w.float().mul_(1.0 / 32768) if w.is_cuda else \
            torch.from_numpy(np.multiply(w.numpy(), np.float32(1.0 / 32768), dtype=np.float32))
    return out


def _pcm(wav: np.ndarray) -> np.ndarray:
    return np.clip(np.round(wav * 32767.0), -32768, 32767).astype(np.int16)  # as prepare stores it


class DecodedAudio(Features):
    """Features decoded from the source audio every epoch: workers decode, resample and trim each
    clip exactly as prepare did (audio.load_audio + audio.preprocess); the device computes mels."""

    def __init__(self, cache, with_wav: bool):
        super().__init__(cache, with_wav)
        self.audio_cfg = cache.audio_cfg
        self._stft: MelSpectrogram | None = None  # built on first finish, moved to its device

    def __getstate__(self):  # workers never finish; they need no STFT module
        return {**self.__dict__, "_stft": None}

    def layout(self, B: int, Tm: int, Tr: int) -> Layout:
        return [("audio", torch.int16, (B, Tm * self.hop)), ("ref_audio", torch.int16, (B, Tr * self.hop))]

    def _decode(self, cache, i: int) -> np.ndarray:
        path = cache.source_root / cache.index.audio[i]
        try:
            wav = preprocess(load_audio(path, self.audio_cfg.sample_rate), self.audio_cfg)
        except AudioError as e:  # changed since prepare; this mode reads the source every epoch
            raise UserError(f"{path}: {e} (on-the-fly mode decodes the source audio of "
                            f"{cache.path} every epoch)") from None
        return _pcm(wav)  # (S,) with S == n_frames * hop when the source is unchanged

    def fill(self, cache, out: dict, idx, ref, ref_off, ref_lens) -> np.ndarray:
        hop = self.hop
        audio, ref_audio = out["audio"].numpy(), out["ref_audio"].numpy()
        mel_lens = np.zeros(len(idx), dtype=np.int64)
        decoded: dict[int, np.ndarray] = {}  # a row's reference may be another row of the batch
        for b, i in enumerate(idx):
            for j in (int(i), int(ref[b])):
                if j not in decoded:
                    decoded[j] = self._decode(cache, j)
            w = decoded[int(i)][: audio.shape[1]]
            audio[b, :w.size] = w
            audio[b, w.size:] = 0
            mel_lens[b] = min(w.size // hop, cache.index.n_frames[i])
            r = decoded[int(ref[b])][ref_off[b] * hop:(ref_off[b] + ref_lens[b]) * hop]
            ref_audio[b, :r.size] = r
            ref_audio[b, r.size:] = 0
            ref_lens[b] = min(ref_lens[b], r.size // hop)
        return mel_lens

    def _log_mel(self, pcm: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
        wav = pcm.float() * (1.0 / 32768)  # (B, S)
        mel = self._stft(wav)  # (B, T, n_mels), T = S // hop
        # The last frames of a clip see zero padding instead of the reflection prepare used;
        # past the length it is padding anyway, so make it exactly the cached pad value.
        keep = torch.arange(mel.shape[1], device=mel.device)[None, :] < lens[:, None]  # (B, T)
        return mel.masked_fill(~keep[..., None], MEL_PAD)

    @torch.no_grad()
    def finish(self, batch: dict) -> dict:
        device = batch["audio"].device
        if self._stft is None or self._stft.basis.device != device:
            self._stft = MelSpectrogram(self.audio_cfg).to(device)
        out = {k: v for k, v in batch.items() if k not in ("audio", "ref_audio")}
        out["mel"] = self._log_mel(batch["audio"], batch["mel_lens"])
        out["ref_mel"] = self._log_mel(batch["ref_audio"], batch["ref_lens"])
        if self.with_wav:
            out["wav"] = batch["audio"].float() * (1.0 / 32768)
        return out


def features_for(cache, cfg, with_wav: bool = False) -> Features:
    """The run's strategy: decoded audio with ``data.on_the_fly``, else the cache's mels."""
    if cfg.data.on_the_fly and any(PSEUDO in s for s in cache.speakers):
        raise UserError(f"{cache.path} holds pseudo-speakers (data.pseudo_speakers), whose sped-up "
                        "copies exist in the cache only: on-the-fly mode would decode their source "
                        "audio at its own speed; train with data.on_the_fly=false")
    return (DecodedAudio if cfg.data.on_the_fly else CachedMels)(cache, with_wav)
