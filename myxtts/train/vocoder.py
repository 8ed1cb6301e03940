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
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from myxtts.audio import LOG_FLOOR, MelSpectrogram
from myxtts.config import Config
from myxtts.data.cache import Cache
from myxtts.errors import UserError
from myxtts.models.checkpoint import load_weights, read_metadata
from myxtts.models.vocoder import (HiFiGANGenerator, MultiPeriodDiscriminator,
                                   MultiScaleDiscriminator, discriminator_loss, generator_loss,
                                   random_segments)
from myxtts.models.xtts import count_parameters
from myxtts.observe.timers import StepTimer
from myxtts.train import checkpoint as ckpt
from myxtts.train.batches import Batches
from myxtts.train.distributed import DistInfo
from myxtts.train.log import RunLog
from myxtts.train.precision import pick_device, resolve
from myxtts.train.trainer import StopRequested, _seed_everything, stop_notice

EPOCH_DECAY = 0.999  # HiFi-GAN's learning-rate decay per epoch


class VocoderStep:
    """One discriminator + generator update; keeps running loss sums on the device."""

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
        self.skipped_total = torch.zeros((), dtype=torch.long, device=dev)
        self.skipped_run = torch.zeros((), dtype=torch.long, device=dev)
        self._sums: dict[str, torch.Tensor] = {}
        self._count = 0

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

    def __call__(self, batch: dict) -> None:
        mel, wav = self._crop(batch)
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

        bad = bad_d | bad_g
        self.skipped_total += bad
        self.skipped_run = (self.skipped_run + 1) * bad
        parts = {**{k: v.detach() for k, v in g.items()}, "disc": d_loss.detach()}
        for k, v in parts.items():
            self._sums[k] = self._sums[k] + v if k in self._sums else v.clone()
        self._count += 1

    def read_window(self) -> dict[str, float]:
        """Mean of each loss since the last call: the one host sync of a logging step."""
        if not self._count:
            return {}
        keys = sorted(self._sums)
        values = torch.stack([self._sums[k].float() for k in keys] + [
            self.skipped_total.float(), self.skipped_run.float()]).tolist()
        out = {k: v / self._count for k, v in zip(keys, values)}
        out["skipped_steps"], out["skipped_in_a_row"] = int(values[-2]), int(values[-1])
        self._sums, self._count = {}, 0
        return out

    @property
    def lr(self) -> float:
        return self.sched_g.get_last_lr()[0]

    def state_dict(self) -> dict:
        return {"discriminators": {"mpd": self.mpd.state_dict(), "msd": self.msd.state_dict()},
                "opt_g": self.opt_g.state_dict(), "opt_d": self.opt_d.state_dict(),
                "sched_g": self.sched_g.state_dict(), "sched_d": self.sched_d.state_dict(),
                "scaler_g": self.scaler_g.state_dict() if self.scaler_g else {},
                "scaler_d": self.scaler_d.state_dict() if self.scaler_d else {},
                "skipped_total": self.skipped_total.cpu(), "skipped_run": self.skipped_run.cpu()}

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
        self.skipped_total.copy_(state["skipped_total"])
        self.skipped_run.copy_(state["skipped_run"])


def train_vocoder(cfg: Config, data: str | Path, out: str | Path, progress: bool = True) -> dict:
    """Train (or resume) the HiFi-GAN vocoder on the cache's waveforms. Returns the run summary."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UserError("vocoder stage runs on one process; start it without torchrun")
    out = Path(out)
    info = DistInfo()
    device = pick_device()
    precision = resolve(cfg.train.precision, device)
    _seed_everything(cfg, 0)
    # Asked first, so that a cache without waveforms gets this message rather than a settings
    # mismatch on data.store_wav (on-the-fly mode decodes the source audio instead).
    if not cfg.data.on_the_fly and not Cache(data).has_wav:
        raise UserError(f"{data}: the cache holds no waveforms (prepared with data.store_wav="
                        "false); the vocoder trains on them: prepare it again with "
                        "data.store_wav=true, or train with data.on_the_fly=true")
    cache = Cache(data, expect=cfg)
    vocab = cache.vocab.symbols
    last = ckpt.latest(out)
    kind = read_metadata(last / "model.safetensors")["kind"] if last is not None else "vocoder"
    if kind != "vocoder":  # checked before anything is written into that directory
        raise UserError(f"{out} holds an {kind} run; give the vocoder stage its own --out")

    gen = HiFiGANGenerator(cfg.vocoder, cfg.audio.n_mels, cfg.audio.hop_length).to(device)
    mpd, msd = MultiPeriodDiscriminator().to(device), MultiScaleDiscriminator().to(device)
    batches = Batches(cache, cfg, device, info, with_wav=True)
    step_fn = VocoderStep(cfg, gen, mpd, msd, precision, batches.stream.epoch_len)
    log = RunLog(out, cfg, True, progress and sys.stderr.isatty())

    step = 0
    if last is not None:
        load_weights(gen, last / "model.safetensors")
        state = ckpt.load_state(last)
        step_fn.load_state_dict(state["step_fn"])
        batches.load_state_dict(state["batches"])
        ckpt.set_rng_state(state["rng"][0])
        step = int(state["step"])
        log.say(f"resuming from {last} at step {step}")
    else:
        out.mkdir(parents=True, exist_ok=True)
        cfg.save(out / "config.yaml")
    n_disc = count_parameters(mpd) + count_parameters(msd)
    log.say(f"vocoder: HiFi-GAN {cfg.vocoder.preset}, {count_parameters(gen) / 1e6:.2f} M "
            f"generator parameters (+{n_disc / 1e6:.2f} M in the discriminators) | device "
            f"{device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'})"
            f" | precision {precision.name}")
    seg = cfg.vocoder.segment_frames
    log.say(f"data: {len(cache)} utterances, {cache.seconds() / 3600:.2f} h | segments of {seg} "
            f"frames ({seg * cfg.audio.hop_length} samples) | {len(batches.shapes)} batch shapes")

    fps = cfg.audio.sample_rate / cfg.audio.hop_length
    timer = StepTimer(device, warmup_steps=min(len(batches.shapes), 2), frames_per_second=fps)
    stopper = StopRequested()
    t_start = time.perf_counter()
    try:
        while step < cfg.train.max_steps:
            with timer.data_wait():
                b = batches.next()
            with timer.compute(tuple(b.tensors["mel"].shape)):
                step_fn(b.tensors)
            step += 1
            # Each step trains on one segment per utterance: count those frames, not the batch's.
            timer.step_done(frames=b.samples * cfg.vocoder.segment_frames, samples=b.samples)

            check_every = min(cfg.train.log_every, cfg.train.max_nonfinite)
            if step % check_every == 0 or step == cfg.train.max_steps:
                window = step_fn.read_window()
                if window.get("skipped_in_a_row", 0) >= cfg.train.max_nonfinite:
                    raise UserError(f"the vocoder losses were not finite for "
                                    f"{window['skipped_in_a_row']} steps in a row (at step "
                                    f"{step}); lower vocoder.lr or use train.precision=fp32")
                log.metrics(step, window, timer.window(), step_fn.lr, 0)
            out_of_time = bool(cfg.train.time_budget_s) and \
                time.perf_counter() - t_start > cfg.train.time_budget_s
            stop = stopper.flag or out_of_time
            if step % cfg.train.checkpoint_every == 0 or step == cfg.train.max_steps or stop:
                state = {"step": step, "step_fn": step_fn.state_dict(),
                         "batches": batches.state_dict(), "rng": [ckpt.rng_state()]}
                ckpt.save(out, step, gen, cfg, vocab, state, cfg.train.keep_last, kind="vocoder")
            if stop:
                log.say(stop_notice(out_of_time, step, out))
                break
    except torch.OutOfMemoryError:
        half = max(8, cfg.vocoder.segment_frames // 2)
        raise UserError(f"out of GPU memory with vocoder.segment_frames="
                        f"{cfg.vocoder.segment_frames}; try vocoder.segment_frames={half} or a "
                        f"smaller data.max_batch_size") from None
    finally:
        stopper.restore()
        batches.stream.close()
    summary = timer.summary()
    summary.update(stage="vocoder", steps=step, wall_seconds=time.perf_counter() - t_start,
                   recompiles_after_warmup=0, shapes_seen=len(batches.shapes),
                   padding_pct=batches.padding_pct, device=str(device), precision=precision.name,
                   compile="off", world_size=1)
    log.finish(summary)
    return summary
