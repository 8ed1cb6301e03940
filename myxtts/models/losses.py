"""Acoustic-model losses and the alignment metric. Pure tensor code: no ``.item()``, no
boolean indexing, no host syncs, so the whole thing compiles into the training step.

One function per decoder, each called by that decoder's ``losses`` (``autoregressive_losses``
by models.mel_decoder, ``duration_losses`` by models.duration_decoder); the terms they share
(the L1 pair, the distance to the diagonal) are helpers here.

- ``mel_l1`` / ``postnet_l1``: L1 on natural-log mels, before and after the post-net, averaged
  over valid frames and mel bins (padding masked by ``mel_lens``).
- ``stop_bce``: one positive per utterance (the decoder step that emits the last real frame),
  negatives before it; steps after it are padding and masked. ``stop_pos_weight`` balances the
  single positive against the ~Tm/r negatives.
- ``guided_attn``: DC-TTS's guided attention (Tachibana et al. 2017) on the alignment layer's
  text attention: penalty W[s, n] = 1 - exp(-(n/N - s/S)^2 / (2 sigma^2)), summed over text
  positions and averaged over valid decoder steps, i.e. "attention mass off the diagonal"
  in [0, 1].
- ``duration`` (duration decoder): MSE between predicted and aligned log(1 + frames) per token.
- ``align`` (duration decoder): the aligner's forward-sum (CTC) loss, see models.aligner.
- ``speaker`` (both decoders, ``model.speaker_loss_weight``): a supervised contrastive loss on
  the conditioning latents' mean, see ``speaker_contrast``.
- ``attention_diagonality``: share of attention mass within ``band`` of the diagonal, averaged
  over valid steps and the batch: ~2*band for uniform attention, → 1 for a clean alignment.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from myxtts.config import ModelConfig
from myxtts.models.aligner import forward_sum_loss
from myxtts.models.layers import length_mask


def decoder_steps(mel_lens: torch.Tensor, reduction: int) -> torch.Tensor:
    """Valid decoder steps per utterance: ceil(mel_len / r)."""
    return torch.div(mel_lens + reduction - 1, reduction, rounding_mode="floor")


def _relative_distance(token_lens, step_lens, n_steps: int, n_tokens: int):
    """|n/N - s/S| for every (step, token), (B, S, Tt), and the validity mask of the pair."""
    s = torch.arange(n_steps, device=token_lens.device, dtype=torch.float32)  # (S,)
    n = torch.arange(n_tokens, device=token_lens.device, dtype=torch.float32)  # (Tt,)
    s_rel = s[None, :, None] / step_lens.clamp(min=1)[:, None, None].float()  # (B, S, 1)
    n_rel = n[None, None, :] / token_lens.clamp(min=1)[:, None, None].float()  # (B, 1, Tt)
    valid = (length_mask(step_lens, n_steps)[:, :, None]
             & length_mask(token_lens, n_tokens)[:, None, :])  # (B, S, Tt)
    return (n_rel - s_rel).abs(), valid


def _guided(attn, dist, valid, step_lens, sigma: float):
    w = 1.0 - torch.exp(-dist.pow(2) / (2 * sigma ** 2))  # (B, S, Tt)
    penalty = (attn.float() * w * valid).sum()
    return penalty / step_lens.sum().clamp(min=1).float()


def _diagonality(attn, dist, valid, step_lens, band: float):
    inside = (attn.float() * ((dist <= band) & valid)).sum(dim=(1, 2))  # (B,)
    return (inside / step_lens.clamp(min=1).float()).mean()


def attention_diagonality(attn, token_lens, mel_lens, reduction: int, band: float = 0.1):
    """attn (B, S, Tt) → 0-dim tensor: mean over the batch of the share of attention mass
    within |n/N - s/S| <= band, over valid steps. A health metric, not a loss."""
    step_lens = decoder_steps(mel_lens, reduction)
    dist, valid = _relative_distance(token_lens, step_lens, attn.shape[1], attn.shape[2])
    return _diagonality(attn, dist, valid, step_lens, band)


def _stop_bce(stop_logits, step_lens, pos_weight: float):
    idx = torch.arange(stop_logits.shape[1], device=stop_logits.device)[None, :]  # (1, S)
    target = (idx == (step_lens - 1)[:, None]).float()  # (B, S)
    mask = (idx < step_lens[:, None]).float()  # (B, S)
    # BCE with pos_weight written out: -[w*y*log(s(x)) + (1-y)*log(1-s(x))]. (The built-in
    # takes pos_weight as a tensor, and building one from a float is a blocking host-to-device
    # copy on every eager step.)
    x = stop_logits.float()
    bce = pos_weight * target * F.softplus(-x) + (1.0 - target) * F.softplus(x)
    return (bce * mask).sum() / mask.sum().clamp(min=1.0)


def _mel_l1_pair(pre, post, target, mask):
    """Both L1 losses in one pass: pre/post/target (B, T, M), mask (B, T) → mean |pred -
    target| over valid frames and bins, for pre and for post, as a (2,) tensor."""
    err = (torch.stack([pre, post]).float() - target.float()).abs()  # (2, B, T, M)
    total = (err * mask[:, :, None]).sum(dim=(1, 2, 3))  # (2,)
    return total / (mask.sum() * target.shape[-1]).clamp(min=1.0)


def autoregressive_losses(cfg: ModelConfig, batch: dict, out: dict) -> dict:
    """The autoregressive decoder's losses, all 0-dim tensors; ``loss`` is the weighted total
    the optimizer minimises, ``attn_diag`` is a detached metric (not part of the loss). Masks,
    decoder lengths and the attention's distance to the diagonal are computed once and shared
    by the losses: every op here is a kernel launch on every eager step."""
    mel, mel_lens, token_lens, attn = batch["mel"], batch["mel_lens"], batch["token_lens"], out["attn"]
    frame_mask = length_mask(mel_lens, mel.shape[1]).float()  # (B, Tm)
    step_lens = decoder_steps(mel_lens, cfg.reduction)  # (B,)
    dist, valid = _relative_distance(token_lens, step_lens, attn.shape[1], attn.shape[2])
    mel_l1, postnet_l1 = _mel_l1_pair(out["mel_pre"], out["mel_post"], mel, frame_mask).unbind(0)
    losses = {
        "mel_l1": mel_l1,
        "postnet_l1": postnet_l1,
        "stop_bce": _stop_bce(out["stop_logits"], step_lens, cfg.stop_pos_weight),
        "guided_attn": _guided(attn, dist, valid, step_lens, cfg.guided_attn_sigma),
    }
    losses["loss"] = (mel_l1 + postnet_l1 + losses["stop_bce"]
                      + cfg.guided_attn_weight * losses["guided_attn"])
    losses["attn_diag"] = _diagonality(attn.detach(), dist, valid, step_lens, 0.1)
    return losses


def duration_losses(cfg: ModelConfig, batch: dict, out: dict) -> dict:
    """The duration decoder's losses, all 0-dim tensors: ``loss`` = mel_l1 + postnet_l1 +
    duration + align; ``attn_diag`` is the hard alignment's diagonality, a detached metric."""
    mel, mel_lens, token_lens, attn = batch["mel"], batch["mel_lens"], batch["token_lens"], out["attn"]
    frame_mask = length_mask(mel_lens, mel.shape[1]).float()  # (B, Tm)
    token_mask = length_mask(token_lens, out["dur"].shape[1]).float()  # (B, Tt)
    mel_l1, postnet_l1 = _mel_l1_pair(out["mel_pre"], out["mel_post"], mel, frame_mask).unbind(0)
    err = (out["log_dur"].float() - torch.log1p(out["dur"].float())).pow(2)  # (B, Tt)
    duration = (err * token_mask).sum() / token_mask.sum().clamp(min=1.0)
    align = forward_sum_loss(out["align_logp"], token_lens, mel_lens)
    step_lens = decoder_steps(mel_lens, cfg.reduction)
    dist, valid = _relative_distance(token_lens, step_lens, attn.shape[1], attn.shape[2])
    return {"mel_l1": mel_l1, "postnet_l1": postnet_l1, "duration": duration, "align": align,
            "loss": mel_l1 + postnet_l1 + duration + align,
            "attn_diag": _diagonality(attn.detach(), dist, valid, step_lens, 0.1)}


# Cosine similarities are divided by this before the softmax: SupCon's range (0.07-0.1), where a
# pair of voices 0.2 apart in cosine already weighs e^2 times less.
SPEAKER_TEMPERATURE = 0.1


def speaker_contrast(voice: torch.Tensor, speaker: torch.Tensor, heard: torch.Tensor) -> torch.Tensor:
    """Supervised contrastive loss (Khosla et al. 2020, its positives summed inside the log) on
    each row's conditioning: voice (B, d) the latents' mean, speaker (B,) ids, heard (B,) rows
    whose reference was kept. For each heard row with another heard row of its speaker and one
    of another speaker: -log of the softmax mass, over the other heard rows, on its own
    speaker's rows; averaged over those rows, 0 where there are none (one speaker in the batch).
    It gives the reference encoder a gradient of its own, which the mel loss alone stops giving
    once the latents read the same for every reference."""
    heard = heard > 0  # the step hands the model's outputs over as floats
    z = F.normalize(voice.float(), dim=-1)  # (B, d)
    sim = z @ z.T / SPEAKER_TEMPERATURE  # (B, B)
    b = sim.shape[0]
    others = heard[:, None] & heard[None, :] & ~torch.eye(b, dtype=torch.bool, device=sim.device)
    same = others & (speaker[:, None] == speaker[None, :])  # (B, B)
    neg_inf = torch.finfo(sim.dtype).min
    log_all = torch.logsumexp(sim.masked_fill(~others, neg_inf), dim=1)  # (B,)
    log_same = torch.logsumexp(sim.masked_fill(~same, neg_inf), dim=1)
    rows = (same.any(1) & (others & ~same).any(1)).float()  # (B,)
    return ((log_all - log_same) * rows).sum() / rows.sum().clamp(min=1.0)
