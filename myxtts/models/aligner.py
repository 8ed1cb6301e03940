"""Unsupervised text-to-mel alignment for the duration decoder, learned with the model (Badlani
et al. 2022, "One TTS Alignment to Rule Them All"; as in RAD-TTS and FastPitch):

    text (B, Tt, d)    ──conv──▶ keys    (B, Tt, A)
    mel  (B, Tm, M)    ──conv──▶ queries (B, Tm, A)
    log p[b, t, n] = log_softmax_n(-temperature * ||q_t - k_n||²) + log prior[t, n]
    forward-sum loss:  CTC over log p with the text as the target sequence: maximises the
                       probability of every monotonic path through all the tokens in order
    hard alignment:    the single most probable monotonic path (monotonic alignment search,
                       Glow-TTS), one token per frame, every token at least one frame
                       → durations (B, Tt), frames per token

The prior is a beta-binomial distribution centred on the diagonal: it makes the alignment
converge in a few hundred steps instead of thousands, and fades in influence as the learned
distances sharpen. The search and the CTC loss are custom ops (models.monotonic): on a GPU each
is one Triton kernel that reads nothing back to the host, and a compiled step holds both in
one graph.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from myxtts.models.layers import length_mask
from myxtts.models.monotonic import ctc_forward_sum, monotonic_path

TEMPERATURE = 5e-4  # RAD-TTS's scale for the squared distances
BLANK_LOGPROB = -1.0  # the CTC blank: a constant, so it never competes with a real token
PRIOR_SCALE = 1.0  # beta-binomial concentration: higher hugs the diagonal more tightly
# Padded tokens get this log-probability rather than -inf: the CTC loss's gradient is NaN where
# its inputs are infinite.
MASKED = -1e4


class Aligner(nn.Module):
    """Soft alignment of mel frames to text tokens. text (B, Tt, d), mel (B, Tm, M) normalised →
    log probabilities (B, Tm, Tt) of each frame's token (padded tokens ``MASKED``)."""

    def __init__(self, d_text: int, n_mels: int, dim: int = 80):
        super().__init__()
        self.keys = nn.Sequential(nn.Conv1d(d_text, 2 * d_text, 3, padding=1), nn.ReLU(),
                                  nn.Conv1d(2 * d_text, dim, 1))
        self.queries = nn.Sequential(nn.Conv1d(n_mels, 2 * n_mels, 3, padding=1), nn.ReLU(),
                                     nn.Conv1d(2 * n_mels, n_mels, 1), nn.ReLU(),
                                     nn.Conv1d(n_mels, dim, 1))

    def forward(self, text, mel, token_lens, mel_lens):
        key_mask = length_mask(token_lens, text.shape[1])[:, None, :]  # (B, 1, Tt)
        frame_mask = length_mask(mel_lens, mel.shape[1])[:, :, None]  # (B, Tm, 1)
        # Padding zeroed before the convolutions, as their own edge padding would be: the
        # scores of real frames and tokens do not depend on how much padding a batch has.
        text = text * key_mask.transpose(1, 2).to(text.dtype)
        mel = mel * frame_mask.to(mel.dtype)
        k = self.keys(text.transpose(1, 2)).transpose(1, 2).float()  # (B, Tt, A)
        q = self.queries(mel.transpose(1, 2)).transpose(1, 2).float()  # (B, Tm, A)
        dist = (q.pow(2).sum(-1, keepdim=True) - 2 * q @ k.transpose(1, 2)
                + k.pow(2).sum(-1)[:, None, :])  # (B, Tm, Tt) squared distances
        logits = (-TEMPERATURE * dist).masked_fill(~key_mask, MASKED)
        logp = torch.log_softmax(logits, dim=-1) + log_beta_binomial_prior(
            token_lens, mel_lens, text.shape[1], mel.shape[1])
        return logp.masked_fill(~key_mask, MASKED)


def log_beta_binomial_prior(token_lens, mel_lens, n_text: int, n_frames: int) -> torch.Tensor:
    """(B, Tm, Tt) log of the beta-binomial prior: for frame t of T (1-based), token n of N is
    drawn from BetaBinomial(N - 1, a = w t, b = w (T - t + 1)), whose mass slides from the first
    token to the last as t goes from 1 to T. Padded frames get a flat zero."""
    t = torch.arange(1, n_frames + 1, device=mel_lens.device, dtype=torch.float32)[None, :, None]
    n = torch.arange(n_text, device=mel_lens.device, dtype=torch.float32)[None, None, :]
    big_n = (token_lens.float() - 1).clamp(min=0)[:, None, None]  # (B, 1, 1)
    big_t = mel_lens.float()[:, None, None]
    a, b = PRIOR_SCALE * t, PRIOR_SCALE * (big_t - t + 1).clamp(min=1e-3)  # (B, Tm, 1)
    k = torch.minimum(n, big_n)  # (B, 1, Tt): keeps lgamma finite past the text's end

    def lbeta(x, y):
        return torch.lgamma(x) + torch.lgamma(y) - torch.lgamma(x + y)

    log_choose = torch.lgamma(big_n + 1) - torch.lgamma(k + 1) - torch.lgamma(big_n - k + 1)
    prior = log_choose + lbeta(k + a, big_n - k + b) - lbeta(a, b)  # (B, Tm, Tt)
    valid = length_mask(mel_lens, n_frames)[:, :, None]
    return torch.where(valid, prior, torch.zeros_like(prior))


def forward_sum_loss(logp, token_lens, mel_lens) -> torch.Tensor:
    """0-dim: CTC loss of the soft alignment (B, Tm, Tt) with target tokens 1..N in order,
    averaged per token and over the batch. A blank class is added at index 0 with a constant
    log-probability, then each frame's row is renormalised. Utterances no path fits (fewer
    frames than tokens) count 0, as ATen's ``zero_infinity``."""
    x = F.pad(logp, (1, 0), value=BLANK_LOGPROB)  # (B, Tm, 1 + Tt); padded tokens ~ -inf
    nll, _ = ctc_forward_sum(torch.log_softmax(x, dim=-1), token_lens, mel_lens)  # (B,)
    return (nll / token_lens.clamp(min=1)).mean()


def hard_alignment(logp, token_lens, mel_lens) -> torch.Tensor:
    """Monotonic alignment search: logp (B, Tm, Tt) → the most probable path as a 0/1 matrix
    (B, Tm, Tt) float32 on logp's device, without a gradient (see models.monotonic)."""
    return monotonic_path(logp.detach(), token_lens, mel_lens)


def durations_to_alignment(durations: torch.Tensor, n_frames: int) -> torch.Tensor:
    """durations (B, Tt) integer frames per token → 0/1 alignment (B, n_frames, Tt): frame t
    belongs to token n when the tokens before n cover at most t frames and through n more."""
    end = durations.cumsum(dim=1)  # (B, Tt)
    start = end - durations
    t = torch.arange(n_frames, device=durations.device)[None, :, None]  # (1, Tm, 1)
    return ((t >= start[:, None, :]) & (t < end[:, None, :])).float()
