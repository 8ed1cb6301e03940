"""HiFi-GAN losses (least-squares GAN, feature matching, mel L1). Each returns a 0-dim tensor;
no host syncs. Weights (``vocoder.mel_loss_weight`` 45, ``vocoder.fm_loss_weight`` 2) are
applied by :func:`generator_loss`, not inside the parts, so the parts can be logged as-is.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from myxtts.config import VocoderConfig


def discriminator_loss(real_logits: list, fake_logits: list) -> torch.Tensor:
    """LSGAN: real → 1, fake → 0, summed over sub-discriminators. Pass fake logits computed on
    a *detached* generator output."""
    loss = real_logits[0].new_zeros(())
    for dr, dg in zip(real_logits, fake_logits):
        loss = loss + torch.mean((1 - dr.float()) ** 2) + torch.mean(dg.float() ** 2)
    return loss


def adversarial_loss(fake_logits: list) -> torch.Tensor:
    """Generator side of LSGAN: fake → 1."""
    loss = fake_logits[0].new_zeros(())
    for dg in fake_logits:
        loss = loss + torch.mean((1 - dg.float()) ** 2)
    return loss


def feature_matching_loss(real_fmaps: list, fake_fmaps: list) -> torch.Tensor:
    """L1 between discriminator activations on real and generated audio (real detached)."""
    loss = real_fmaps[0][0].new_zeros(())
    for fr_list, fg_list in zip(real_fmaps, fake_fmaps):
        for fr, fg in zip(fr_list, fg_list):
            loss = loss + F.l1_loss(fg.float(), fr.detach().float())
    return loss


def mel_loss(mel_fn, fake_wav: torch.Tensor, real_mel: torch.Tensor) -> torch.Tensor:
    """L1 between the log-mel of generated audio (``mel_fn``: audio.MelSpectrogram) and the
    target log-mel (B, T, M)."""
    return F.l1_loss(mel_fn(fake_wav.float()), real_mel.float())


def generator_loss(cfg: VocoderConfig, mel_fn, fake_wav, real_mel, mpd_fake, msd_fake,
                   mpd_real_fmaps, msd_real_fmaps) -> dict:
    """The generator's total and its parts. mpd_fake / msd_fake are (logits, fmaps) of the
    discriminators on the *non-detached* generator output; *_real_fmaps from real audio."""
    adv = adversarial_loss(mpd_fake[0]) + adversarial_loss(msd_fake[0])
    fm = (feature_matching_loss(mpd_real_fmaps, mpd_fake[1])
          + feature_matching_loss(msd_real_fmaps, msd_fake[1]))
    mel = mel_loss(mel_fn, fake_wav, real_mel)
    total = adv + cfg.fm_loss_weight * fm + cfg.mel_loss_weight * mel
    return {"loss": total, "adv": adv, "feature_matching": fm, "mel_l1": mel}
