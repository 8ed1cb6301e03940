"""The vocoder stage: ``myxtts train --stage vocoder``.

Trains the generator on the waveforms stored in the cache (``data.store_wav=true``), one random
``vocoder.segment_frames`` crop per utterance, on the reconstruction losses of
:mod:`myxtts.models.vocoder` (``mel_loss_weight`` x mel L1 + ``stft_loss_weight`` x
multi-resolution STFT), with the optimizer and schedule the builder gives it
(``train.optim.build_vocoder_optimizer``: AdamW, the rate decayed per epoch as HiFi-GAN's is,
then annealed over the last 20 % of the steps or the time budget).

With a ``teacher`` (``--mels-from RUN``: an acoustic model, frozen, in eval mode, in fp32 as
synthesis runs it) the generator reads the mels that model makes of each batch teacher-forced
(the duration decoder's durations the aligner's, the autoregressive decoder fed the recorded
frames, so every frame lines up with the recording) instead of the recording's own: it learns
to render the acoustic model's mels, errors and smoothing included, into the recorded waveform.
This is ground-truth-aligned fine-tuning, as Tacotron 2's and HiFi-GAN's recipes train their
vocoders. The mel loss still compares with the recording's mel. A new run keeps its own copy
of the teacher's weights (``RUN/mels_from.safetensors``, named in its plan), so a resume reads the same
model even after the acoustic run has gone on training and replaced its best weights.

Single process. Losses stay on the device and are read only on logging steps; a non-finite loss
makes the fused optimizer skip its update on the device, like the acoustic trainer does.
Checkpoints (``train.checkpoint``, kind "vocoder"): the generator in ``model.safetensors`` (what
:mod:`myxtts.vocode` loads: ``RUN/vocoder`` of an acoustic run is used by that run unasked), the
optimizer, scheduler, batch position and RNG state in ``state.pt``; an existing ``--out``
resumes.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import torch
import torch.nn.functional as F

from myxtts.audio import MelSpectrogram
from myxtts.config import MIN_SEGMENT_FRAMES, Config
from myxtts.data.cache import Cache
from myxtts.data.features import MEL_PAD
from myxtts.data.format import sha256
from myxtts.data.sampler import make_sampler
from myxtts.errors import UserError
from myxtts.files import atomic_write
from myxtts.models.checkpoint import load_model
from myxtts.models.monotonic import run_on_host
from myxtts.models.vocoder import build_generator, random_segments, reconstruction_loss
from myxtts.models.xtts import count_parameters
from myxtts.rundir import RunDir
from myxtts.train import finetune
from myxtts.train.batches import Batches
from myxtts.train.optim import Horizon, build_vocoder_optimizer, build_vocoder_scheduler
from myxtts.train.plan import Plan
from myxtts.train.spec import Run, Setup
from myxtts.train.step import StepCounters


def find_teacher(path, data) -> finetune.Source:
    """``--mels-from``'s acoustic model, refused in one line unless it reads ``data`` (its mel
    settings, text mode and vocabulary)."""
    src = finetune.find(path, "acoustic", flag="--mels-from")
    finetune.check_data(src, data, reads_text=True)  # an acoustic model reads the text
    return src


def load_teacher(mels_from: dict, data, device: torch.device) -> torch.nn.Module:
    """The acoustic model a plan's ``mels_from`` names (the run's own copy once it has one),
    frozen, in eval mode, on ``device``; refused if that file is not the one the run started on
    (a resume would train on another model's mels)."""
    path = next((p for p in (mels_from.get("kept"), mels_from["path"]) if p and Path(p).is_file()), None)
    if path is None:
        raise UserError(f"{mels_from['path']}: the acoustic model this vocoder run reads the mels "
                        "of is gone" + (f", and so is the run's copy {mels_from['kept']}"
                                        if mels_from.get("kept") else "")
                        + "; put it back, or train the vocoder into a new --out")
    src = find_teacher(path, data)
    if src.sha256 != mels_from["sha256"]:
        raise UserError(f"{path}: not the acoustic model this vocoder run started on (sha256 "
                        f"{src.sha256[:12]}, the run's plan says {mels_from['sha256'][:12]}); "
                        "put that file back, or train the vocoder into a new --out")
    model = load_model(src.path, device)[0]
    return model.requires_grad_(False)


def keep_teacher(plan: Plan, out) -> Plan:
    """A new run's plan, its teacher copied into the run's folder (:attr:`RunDir.mels_from`) and the copy named
    in ``mels_from["kept"]``. The copy is checked against the sha256 the plan holds."""
    copy = RunDir(out).mels_from.resolve()
    with atomic_write(copy) as tmp:
        shutil.copyfile(plan.mels_from["path"], tmp)
    if sha256(copy) != plan.mels_from["sha256"]:
        copy.unlink()
        raise UserError(f"{plan.mels_from['path']}: changed while the vocoder run started (is its "
                        "acoustic run still training?); run the command again")
    return dataclasses.replace(plan, mels_from={**plan.mels_from, "kept": str(copy)})


def build(s: Setup) -> dict:
    """The generator, its teacher (``mels_from``) and its step, which holds the optimizer and
    schedule; the batches: whole utterances with their waveforms, cropped by the step."""
    cfg, data, device = s.cfg, s.data, s.device
    if cfg.train.freeze:
        raise UserError("train.freeze names parts of the acoustic model; the vocoder stage trains "
                        "every weight of its generator: leave it empty")
    # Asked first, so that a cache without waveforms gets this message rather than a settings
    # mismatch on data.store_wav (on-the-fly mode decodes the source audio instead).
    if not cfg.data.on_the_fly and not Cache(data).has_wav:
        raise UserError(f"{data}: the cache holds no waveforms (prepared with data.store_wav="
                        "false); the vocoder trains on them: prepare it again with "
                        "data.store_wav=true, or train with data.on_the_fly=true")
    cache = Cache(data, expect=cfg)
    gen = build_generator(cfg).to(device)
    teacher = load_teacher(s.plan.mels_from, data, device) if s.plan.mels_from else None
    if teacher is not None:
        run_on_host(cfg.train.aligner_on_host)  # its aligner, as the acoustic stage would run it
    # a teacher conditioned on speaker embeddings reads them from the batch, like in training
    voice = teacher is not None and teacher.speaker_proj is not None
    batches = Batches(cache, cfg, device, s.info, with_wav=True, with_voice=voice) if s.with_batches else None
    sampler = batches.sampler if batches else make_sampler(cache, cfg, "train")
    opt = build_vocoder_optimizer(gen, cfg)
    horizon = Horizon.of(cfg.train)
    sched = build_vocoder_scheduler(opt, cfg, len(sampler), horizon)
    step_fn = VocoderStep(cfg, gen, opt, sched, s.precision, teacher)
    return dict(cache=cache, model=gen, step_fn=step_fn, optimizer=opt, scheduler=sched,
                sampler=sampler, batches=batches, horizon=horizon)


def header(asked: Config, run: Run) -> list[str]:
    """The run header: the generator, the plan, where its mels come from, the segments."""
    seg, plan = run.cfg.vocoder.segment_frames, run.plan
    return [f"vocoder: {count_parameters(run.model) / 1e6:.2f} M parameters | device {plan.device} "
            f"({plan.device_name}) | precision {run.precision.name}"
            + (f" | init from {finetune.describe_origin(plan.init_from)}" if plan.init_from else "")
            + (f" | mels from {finetune.describe_origin(plan.mels_from)}" if plan.mels_from else
               " | mels from the recordings"),
            *plan.notes,
            f"data: {len(run.cache)} utterances, {run.cache.seconds() / 3600:.2f} h | segments "
            f"of {seg} frames ({seg * run.cfg.audio.hop_length} samples) | {len(run.shapes)} batch shapes"]


def out_of_memory(cfg: Config) -> UserError:
    seg = cfg.vocoder.segment_frames
    return UserError(f"out of GPU memory with vocoder.segment_frames={seg}; try "
                     f"vocoder.segment_frames={max(MIN_SEGMENT_FRAMES, seg // 2)} or a smaller "
                     "data.max_batch_size")


class VocoderStep(StepCounters):
    """One generator update; keeps running loss sums on the device."""

    micro_batches = 1  # one batch per update; the segments make the batch size
    compile_mode, compile_notes = "off", ()  # never compiled
    nonfinite_hint = "lower vocoder.lr or use train.precision=fp32"

    def __init__(self, cfg: Config, gen, optimizer, scheduler, precision, teacher=None):
        self.cfg, self.gen, self.precision, self.teacher = cfg, gen, precision, teacher
        dev = precision.device
        self.opt, self.sched = optimizer, scheduler
        self.scaler = precision.grad_scaler()
        self.mel_fn = MelSpectrogram(cfg.audio).to(dev)
        super().__init__(dev)

    def _crop(self, batch: dict):
        """→ the generator's input mel, the recording's mel and its waveform, one random segment
        per utterance, the same frames of all three: (B, seg, M), (B, seg, M), (B, seg * hop)."""
        seg, hop = self.cfg.vocoder.segment_frames, self.cfg.audio.hop_length
        mel, wav = batch["mel"].float(), batch["wav"].float()
        if self.teacher is not None:  # (B, Tm, 2M): the teacher's mels beside, cropped as one
            mel = torch.cat([self._teacher_mels(batch), mel], dim=2)
        if mel.shape[1] < seg:  # a batch shorter than one segment: pad with silence (static)
            mel = F.pad(mel, (0, 0, 0, seg - mel.shape[1]), value=MEL_PAD)
            wav = F.pad(wav, (0, seg * hop - wav.shape[1]))
        mel, wav = random_segments(mel, wav, batch["mel_lens"], seg, hop)
        mel_in, mel = (mel, mel) if self.teacher is None else mel.chunk(2, dim=2)
        return mel_in, mel, wav

    def _teacher_mels(self, batch: dict) -> torch.Tensor:
        """The teacher's teacher-forced mels of ``batch``, (B, Tm, M), MEL_PAD past each row's
        length. In fp32, as synthesis runs it: the generator learns the mels it will be given.
        An autoregressive teacher reads whole groups of r frames: the batch is padded to them."""
        mel, tm = batch["mel"], batch["mel"].shape[1]
        extra = -tm % self.teacher.cfg.reduction
        if extra:
            batch = {**batch, "mel": F.pad(mel, (0, 0, 0, extra), value=MEL_PAD)}
        with torch.no_grad():
            made = self.teacher(batch)["mel_post"][:, :tm].float()  # (B, Tm, M)
        pad = torch.arange(tm, device=mel.device) >= batch["mel_lens"][:, None]  # (B, Tm)
        return made.masked_fill(pad[..., None], MEL_PAD)

    def __call__(self, micro_batches: list[dict]) -> None:
        mel_in, mel, wav = self._crop(micro_batches[0])  # (B, seg, M) x2, (B, seg * hop)
        with self.precision.autocast():
            fake = self.gen(mel_in)  # (B, seg * hop)
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
        sched = state["sched"]
        if "lr_lambdas" not in sched:  # saved by the ExponentialLR before the cool-down: its step count goes on
            sched = {**{k: v for k, v in sched.items() if k != "gamma"}, "lr_lambdas": [None]}
        self.sched.load_state_dict(sched)
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.load_counters(state)
