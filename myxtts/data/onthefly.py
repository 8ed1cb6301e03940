"""On-the-fly mode (data.on_the_fly=true): workers decode raw audio, the device computes mels.

For corpora too large to cache as mels. Planning is unchanged: the sampler uses the cache's
lengths (the cache still holds tokens and lengths; prepare with data.store_wav=false keeps it
small), so shapes, budget and resume behave exactly as in cached mode. Workers decode, resample
and trim each clip exactly as prepare did (audio.load_audio + audio.preprocess) and ship int16
waveforms cropped/padded to the bucket shape; :class:`OnTheFlyMel`, applied by the
DevicePrefetcher right after the copy, turns them into the batch contract's ``mel`` and
``ref_mel`` in one batched STFT on the GPU.

Worker batch (replaces ``mel``/``ref_mel``)::

    audio      (B, Tm * hop)  int16, zero-padded
    ref_audio  (B, Tr * hop)  int16, zero-padded
"""
from __future__ import annotations

import numpy as np
import torch

from myxtts.audio import AudioError, MelSpectrogram, load_audio, preprocess
from myxtts.data.dataset import MEL_PAD, CachedBatches
from myxtts.data.sampler import BatchPlan
from myxtts.errors import UserError


def _pcm(wav: np.ndarray) -> np.ndarray:
    return np.clip(np.round(wav * 32767.0), -32768, 32767).astype(np.int16)  # as prepare stores it


class OnTheFlyBatches(CachedBatches):
    """Like CachedBatches, but the features come from decoding the source audio."""

    def layout(self, plan: BatchPlan) -> list[tuple[str, torch.dtype, tuple]]:
        B, Tt, Tm = len(plan.indices), plan.text_len, plan.mel_len
        return [("tokens", torch.int64, (B, Tt)), ("audio", torch.int16, (B, Tm * self.hop)),
                ("ref_audio", torch.int16, (B, self.ref_len * self.hop))] + \
               [(k, torch.int64, (B,)) for k in ("token_lens", "mel_lens", "ref_lens", "speaker",
                                                 "index")]

    def _decode(self, i: int) -> np.ndarray:
        c = self.cache
        path = c.source_root / c.audio_paths[i]
        try:
            wav = preprocess(load_audio(path, c.audio_cfg.sample_rate), c.audio_cfg)
        except AudioError as e:  # changed since prepare; this mode reads the source every epoch
            raise UserError(f"{path}: {e} (on-the-fly mode decodes the source audio of "
                            f"{c.path} every epoch)") from None
        return _pcm(wav)  # (S,) with S == n_frames * hop when the source is unchanged

    def _build(self, plan: BatchPlan):
        c, idx = self.cache, np.asarray(plan.indices, dtype=np.int64)
        hop = self.hop
        n_tokens = c.n_tokens[idx]
        ref, ref_off, ref_lens = self.refs.pick(idx, plan.epoch)
        out = self._alloc(plan)
        audio, ref_audio = out["audio"].numpy(), out["ref_audio"].numpy()
        mel_lens = out["mel_lens"].numpy()
        decoded: dict[int, np.ndarray] = {}  # a row's reference may be another row of the batch
        for b, i in enumerate(idx):
            for j in (int(i), int(ref[b])):
                if j not in decoded:
                    decoded[j] = self._decode(j)
            w = decoded[int(i)][: audio.shape[1]]
            audio[b, :w.size] = w
            audio[b, w.size:] = 0
            mel_lens[b] = min(w.size // hop, c.n_frames[i])
            r = decoded[int(ref[b])][ref_off[b] * hop:(ref_off[b] + ref_lens[b]) * hop]
            ref_audio[b, :r.size] = r
            ref_audio[b, r.size:] = 0
            ref_lens[b] = min(ref_lens[b], r.size // hop)
        return self._finish(out, plan, idx, n_tokens, ref_lens)


class OnTheFlyMel(torch.nn.Module):
    """Device-side completion of an on-the-fly batch: ``audio``/``ref_audio`` → ``mel``/
    ``ref_mel`` (+ ``wav`` float when ``with_wav``), frames past each length set to MEL_PAD."""

    def __init__(self, audio_cfg, with_wav: bool = False):
        super().__init__()
        self.mel = MelSpectrogram(audio_cfg)
        self.with_wav = with_wav

    def _log_mel(self, pcm: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
        wav = pcm.float() * (1.0 / 32768)  # (B, S)
        mel = self.mel(wav)  # (B, T, n_mels), T = S // hop
        # The last frames of a clip see zero padding instead of the reflection prepare used;
        # past the length it is padding anyway, so make it exactly the cached pad value.
        keep = torch.arange(mel.shape[1], device=mel.device)[None, :] < lens[:, None]  # (B, T)
        return mel.masked_fill(~keep[..., None], MEL_PAD)

    @torch.no_grad()
    def forward(self, batch: dict) -> dict:
        if "audio" not in batch:  # already a cached-mode batch
            return batch
        if self.mel.basis.device != batch["audio"].device:
            self.mel.to(batch["audio"].device)
        out = {k: v for k, v in batch.items() if k not in ("audio", "ref_audio")}
        out["mel"] = self._log_mel(batch["audio"], batch["mel_lens"])
        out["ref_mel"] = self._log_mel(batch["ref_audio"], batch["ref_lens"])
        if self.with_wav:
            out["wav"] = batch["audio"].float() * (1.0 / 32768)
        return out
