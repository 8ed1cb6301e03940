"""The vocoder stage: ``myxtts train --stage vocoder``.

Trains the generator on the waveforms stored in the cache (``data.store_wav=true``), one random
``vocoder.segment_frames`` crop per utterance, on the reconstruction losses of
:mod:`myxtts.models.vocoder` (``mel_loss_weight`` x mel L1 + ``stft_loss_weight`` x
multi-resolution STFT), with the optimizer and schedule the builder gives it
(``train.optim.build_vocoder_optimizer``: AdamW, the rate decayed per epoch as HiFi-GAN's is).

Single process. Losses stay on the device and are read only on logging steps; a non-finite loss
makes the fused optimizer skip its update on the device, like the acoustic trainer does.
Checkpoints (``train.checkpoint``, kind "vocoder"): the generator in ``model.safetensors`` (what
:mod:`myxtts.vocode` loads: ``RUN/vocoder`` of an acoustic run is used by that run unasked), the
optimizer, scheduler, batch position and RNG state in ``state.pt``; an existing ``--out``
resumes.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from myxtts.audio import LOG_FLOOR, MelSpectrogram
from myxtts.config import Config
from myxtts.models.vocoder import random_segments, reconstruction_loss
from myxtts.train.step import StepCounters


class VocoderStep(StepCounters):
    """One generator update; keeps running loss sums on the device."""

    micro_batches = 1  # one batch per update; the segments make the batch size
    compile_mode, compile_notes = "off", ()  # never compiled
    nonfinite_hint = "lower vocoder.lr or use train.precision=fp32"

    def __init__(self, cfg: Config, gen, optimizer, scheduler, precision):
        self.cfg, self.gen, self.precision = cfg, gen, precision
        dev = precision.device
        self.opt, self.sched = optimizer, scheduler
        self.scaler = precision.grad_scaler()
        self.mel_fn = MelSpectrogram(cfg.audio).to(dev)
        super().__init__(dev)

    def _crop(self, batch: dict):
        seg, hop = self.cfg.vocoder.segment_frames, self.cfg.audio.hop_length
        mel, wav = batch["mel"].float(), batch["wav"].float()
        if mel.shape[1] < seg:  # a batch shorter than one segment: pad with silence (static)
            mel = F.pad(mel, (0, 0, 0, seg - mel.shape[1]), value=math.log(LOG_FLOOR))
            wav = F.pad(wav, (0, seg * hop - wav.shape[1]))
        return random_segments(mel, wav, batch["mel_lens"], seg, hop)

    def __call__(self, micro_batches: list[dict]) -> None:
        mel, wav = self._crop(micro_batches[0])  # (B, seg, M), (B, seg * hop)
        with self.precision.autocast():
            fake = self.gen(mel)  # (B, seg * hop)
        # The losses run outside autocast: the STFT and log are precision-sensitive.
        parts = reconstruction_loss(self.cfg.vocoder, self.mel_fn, fake.float(), mel, wav)
        self.opt.zero_grad(set_to_none=True)
        bad = ~torch.isfinite(parts["loss"].detach())
        if self.scaler is not None:
            self.scaler.scale(parts["loss"]).backward()
            self.scaler.step(self.opt)  # skips by itself on inf/nan gradients
            self.scaler.update()
        else:
            parts["loss"].backward()
            self.opt.found_inf = bad.float()  # the fused kernel skips the update on the device
            self.opt.step()
        self.sched.step()
        self.add(parts)
        self.step_done(bad)

    def frames_of(self, batch) -> int:
        # Each step trains on one segment per utterance: count those frames, not the batch's.
        return batch.samples * self.cfg.vocoder.segment_frames

    @property
    def lr(self) -> float:
        return self.sched.get_last_lr()[0]

    def state_dict(self) -> dict:
        return {"opt": self.opt.state_dict(), "sched": self.sched.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler else {}, **self.counters_state()}

    def load_state_dict(self, state: dict) -> None:
        self.opt.load_state_dict(state["opt"])
        self.sched.load_state_dict(state["sched"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.load_counters(state)
