"""The HiFi-GAN vocoder stage: ``myxtts train --stage vocoder``.

Trains the generator on the waveforms stored in the cache (``data.store_wav=true``), one random
``vocoder.segment_frames`` crop per utterance, with the recipe of ``myxtts.models.vocoder``: a
discriminator step (MPD + MSD, LSGAN) on the detached generator output, then a generator step
(adversarial + ``fm_loss_weight`` x feature matching + ``mel_loss_weight`` x mel L1) through
the just-updated discriminators. Both AdamW optimizers (betas 0.8, 0.99) decay their learning
rate by 0.999 per epoch, as in the paper (``train.schedule=constant`` keeps it fixed).

Single process. Losses stay on the device and are read only on logging steps; a non-finite loss
makes the fused optimizers skip their update on the device, like the acoustic trainer does.
Checkpoints (``train.checkpoint``, kind "vocoder"): the generator in ``model.safetensors``
(what ``myxtts synthesize --vocoder RUN`` loads), the discriminators, both optimizers and
schedulers, the batch position and the RNG state in ``state.pt``; an existing ``--out`` resumes.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from myxtts.audio import LOG_FLOOR, MelSpectrogram
from myxtts.config import Config
from myxtts.models.vocoder import discriminator_loss, generator_loss, random_segments
from myxtts.train.step import StepCounters

EPOCH_DECAY = 0.999  # HiFi-GAN's learning-rate decay per epoch


class VocoderStep(StepCounters):
    """One discriminator + generator update; keeps running loss sums on the device."""

    micro_batches = 1  # one batch per update; the segments make the batch size
    compile_mode = "off"
    nonfinite_hint = "lower vocoder.lr or use train.precision=fp32"

    def __init__(self, cfg: Config, gen, mpd, msd, precision, epoch_len: int):
        self.cfg, self.gen, self.mpd, self.msd, self.precision = cfg, gen, mpd, msd, precision
        v, dev = cfg.vocoder, precision.device
        self.disc_params = [*mpd.parameters(), *msd.parameters()]
        self.opt_g = torch.optim.AdamW(gen.parameters(), v.lr, betas=(0.8, 0.99), fused=True)
        self.opt_d = torch.optim.AdamW(self.disc_params, v.lr, betas=(0.8, 0.99), fused=True)
        gamma = 1.0 if cfg.train.schedule == "constant" else EPOCH_DECAY ** (1 / max(1, epoch_len))
        self.sched_g = torch.optim.lr_scheduler.ExponentialLR(self.opt_g, gamma)
        self.sched_d = torch.optim.lr_scheduler.ExponentialLR(self.opt_d, gamma)
        self.scaler_g, self.scaler_d = precision.grad_scaler(), precision.grad_scaler()
        self.mel_fn = MelSpectrogram(cfg.audio).to(dev)
        super().__init__(dev)

    def _crop(self, batch: dict):
        seg, hop = self.cfg.vocoder.segment_frames, self.cfg.audio.hop_length
        mel, wav = batch["mel"].float(), batch["wav"].float()
        if mel.shape[1] < seg:  # a batch shorter than one segment: pad with silence (static)
            mel = F.pad(mel, (0, 0, 0, seg - mel.shape[1]), value=math.log(LOG_FLOOR))
            wav = F.pad(wav, (0, seg * hop - wav.shape[1]))
        return random_segments(mel, wav, batch["mel_lens"], seg, hop)

    def _update(self, loss, opt, scaler, sched) -> torch.Tensor:
        """Backward and step; returns the device flag "this update was skipped"."""
        opt.zero_grad(set_to_none=True)
        bad = ~torch.isfinite(loss.detach())
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)  # skips by itself on inf/nan gradients
            scaler.update()
        else:
            loss.backward()
            opt.found_inf = bad.float()  # the fused kernel skips the update on the device
            opt.step()
        sched.step()
        return bad

    def __call__(self, micro_batches: list[dict]) -> None:
        mel, wav = self._crop(micro_batches[0])
        ac = self.precision.autocast
        with ac():
            fake = self.gen(mel)
            fake_d = fake.detach()
            d_loss = (discriminator_loss(self.mpd(wav)[0], self.mpd(fake_d)[0])
                      + discriminator_loss(self.msd(wav)[0], self.msd(fake_d)[0]))
        bad_d = self._update(d_loss, self.opt_d, self.scaler_d, self.sched_d)

        for p in self.disc_params:  # the generator step needs no discriminator weight grads
            p.requires_grad_(False)
        try:
            with ac():
                with torch.no_grad():
                    (_, mpd_real), (_, msd_real) = self.mpd(wav), self.msd(wav)
                mpd_fake, msd_fake = self.mpd(fake), self.msd(fake)
            # The mel loss runs outside autocast: the STFT and log are precision-sensitive.
            g = generator_loss(self.cfg.vocoder, self.mel_fn, fake.float(), mel, mpd_fake,
                               msd_fake, mpd_real, msd_real)
            bad_g = self._update(g["loss"], self.opt_g, self.scaler_g, self.sched_g)
        finally:
            for p in self.disc_params:
                p.requires_grad_(True)

        self.add({**g, "disc": d_loss})
        self.step_done(bad_d | bad_g)

    def frames_of(self, batch) -> int:
        # Each step trains on one segment per utterance: count those frames, not the batch's.
        return batch.samples * self.cfg.vocoder.segment_frames

    @property
    def lr(self) -> float:
        return self.sched_g.get_last_lr()[0]

    def state_dict(self) -> dict:
        return {"discriminators": {"mpd": self.mpd.state_dict(), "msd": self.msd.state_dict()},
                "opt_g": self.opt_g.state_dict(), "opt_d": self.opt_d.state_dict(),
                "sched_g": self.sched_g.state_dict(), "sched_d": self.sched_d.state_dict(),
                "scaler_g": self.scaler_g.state_dict() if self.scaler_g else {},
                "scaler_d": self.scaler_d.state_dict() if self.scaler_d else {},
                **self.counters_state()}

    def load_state_dict(self, state: dict) -> None:
        self.mpd.load_state_dict(state["discriminators"]["mpd"])
        self.msd.load_state_dict(state["discriminators"]["msd"])
        self.opt_g.load_state_dict(state["opt_g"])
        self.opt_d.load_state_dict(state["opt_d"])
        self.sched_g.load_state_dict(state["sched_g"])
        self.sched_d.load_state_dict(state["sched_d"])
        for scaler, key in ((self.scaler_g, "scaler_g"), (self.scaler_d, "scaler_d")):
            if scaler is not None and state.get(key):
                scaler.load_state_dict(state[key])
        self.load_counters(state)
