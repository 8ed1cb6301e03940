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
distances sharpen. The search runs on the host in numpy: a loop over frames, each a vector
operation over the batch and the text (a few milliseconds per batch), and is not
differentiated. On a GPU that costs one device-to-host copy of the soft alignment per step, a
sync the autoregressive decoder does not have; a compiled step breaks its graph around it.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from myxtts.models.layers import length_mask

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
    log-probability, then each frame's row is renormalised."""
    b, _, n_text = logp.shape
    x = F.pad(logp, (1, 0), value=BLANK_LOGPROB)  # (B, Tm, 1 + Tt); padded tokens ~ -inf
    x = torch.log_softmax(x, dim=-1).transpose(0, 1)  # (Tm, B, 1 + Tt)
    targets = torch.arange(1, n_text + 1, device=logp.device).expand(b, n_text)
    return F.ctc_loss(x, targets, mel_lens, token_lens, blank=0, reduction="mean",
                      zero_infinity=True)


@torch.compiler.disable  # host code: a compiled step calls it between two graphs
@torch.no_grad()
def hard_alignment(logp, token_lens, mel_lens) -> torch.Tensor:
    """Monotonic alignment search: logp (B, Tm, Tt) → the most probable path as a 0/1 matrix
    (B, Tm, Tt), same device and dtype float32. Each valid frame takes exactly one token; the
    tokens are visited in order, from the first at frame 0 to the last at the final frame, each
    for at least one frame (when the clip has at least as many frames as the text has tokens)."""
    lp = logp.detach().float().cpu().numpy()
    n_lens, t_lens = token_lens.cpu().numpy(), mel_lens.cpu().numpy()
    path = _search(lp, n_lens, t_lens)
    return torch.from_numpy(path).to(logp.device)


def _search(lp: np.ndarray, n_lens: np.ndarray, t_lens: np.ndarray) -> np.ndarray:
    b, tm, tt = lp.shape
    score = np.full((b, tt), -np.inf)  # best log-prob of a path ending at (t, n)
    score[:, 0] = lp[:, 0, 0]
    advanced = np.zeros((b, tm, tt), dtype=bool)  # the best path into (t, n) came from n - 1
    pad = np.full((b, 1), -np.inf)
    for t in range(1, tm):
        prev = np.concatenate([pad, score[:, :-1]], axis=1)  # (B, Tt) score at (t-1, n-1)
        advanced[:, t] = prev > score
        score = np.maximum(prev, score) + lp[:, t]
    path = np.zeros((b, tm, tt), dtype=np.float32)
    rows = np.arange(b)
    n = np.maximum(n_lens - 1, 0)
    for t in range(tm - 1, -1, -1):
        live = t < t_lens
        path[rows[live], t, n[live]] = 1.0
        step = live & advanced[rows, t, n] & (n > 0)
        n = n - step
    return path


def durations_to_alignment(durations: torch.Tensor, n_frames: int) -> torch.Tensor:
    """durations (B, Tt) integer frames per token → 0/1 alignment (B, n_frames, Tt): frame t
    belongs to token n when the tokens before n cover at most t frames and through n more."""
    end = durations.cumsum(dim=1)  # (B, Tt)
    start = end - durations
    t = torch.arange(n_frames, device=durations.device)[None, :, None]  # (1, Tm, 1)
    return ((t >= start[:, None, :]) & (t < end[:, None, :])).float()
