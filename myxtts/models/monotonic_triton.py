"""Triton kernels of the aligner's dynamic programs (see models.monotonic for what they compute).

One program per utterance walks its frames in order, vectorised over the tokens (the path
search) or the 2N + 1 CTC states (the forward-sum loss), with the lengths read on the device:
no host sync, one launch per op. A frame's update needs the previous frame's value of the
neighbouring token, which another thread holds, so each frame's values go through a global
scratch row with a barrier on either side (as the super-monotonic-align project does): it stays
in L1/L2, and at the batch sizes a GPU trains on (hundreds of utterances) every SM has
utterances of its own.

The kernels are plain Triton, so ``TRITON_INTERPRET=1`` runs them on CPU tensors: the tests
compare them with the numpy search and ATen's CTC there.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _path_kernel(lp_ptr, tok_ptr, mel_ptr, score_ptr, adv_ptr, path_ptr, TM, TT,
                 BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    n_tok = tl.load(tok_ptr + b).to(tl.int64)
    n_frm = tl.load(mel_ptr + b).to(tl.int64)
    n = tl.arange(0, BLOCK)
    inside = n < TT
    lp_row = lp_ptr + b * TM * TT
    adv_row = adv_ptr + b * TM * TT
    path_row = path_ptr + b * TM * TT
    score_row = score_ptr + b * TT
    # Frame 0 sits on token 0. Scores in float64, as the numpy reference keeps them, so that
    # near-ties between two paths break the same way.
    first = tl.load(lp_row + n, mask=inside & (n == 0), other=0.0).to(tl.float64)
    score = tl.where(n == 0, first, float("-inf"))
    tl.store(score_row + n, score, mask=inside)
    tl.store(adv_row + n, tl.zeros([BLOCK], dtype=tl.int8), mask=inside)
    tl.debug_barrier()
    for t in range(1, n_frm):
        prev = tl.load(score_row + n - 1, mask=inside & (n > 0), other=float("-inf"))
        lp_t = tl.load(lp_row + t * TT + n, mask=inside, other=0.0).to(tl.float64)
        tl.store(adv_row + t * TT + n, (prev > score).to(tl.int8), mask=inside)
        score = tl.maximum(prev, score) + lp_t
        tl.debug_barrier()  # every thread has read the old row before it is overwritten
        tl.store(score_row + n, score, mask=inside)
        tl.debug_barrier()
    # Back from the last token at the last frame: one token back wherever the best path into
    # (t, n) came from n - 1.
    k = tl.maximum(n_tok - 1, 0)
    for i in range(0, n_frm):
        t = n_frm - 1 - i
        tl.store(path_row + t * TT + k, 1.0)
        came = tl.load(adv_row + t * TT + k)
        k = k - ((came != 0) & (k > 0)).to(tl.int64)


def triton_monotonic_path(logp: Tensor, token_lens: Tensor, mel_lens: Tensor) -> Tensor:
    """models.monotonic.monotonic_path on the tensors' device."""
    b, tm, tt = logp.shape
    logp = logp.detach().float().contiguous()
    path = torch.zeros(b, tm, tt, dtype=torch.float32, device=logp.device)
    if b == 0 or tm == 0 or tt == 0:
        return path
    score = torch.empty(b, tt, dtype=torch.float64, device=logp.device)
    advanced = torch.empty(b, tm, tt, dtype=torch.int8, device=logp.device)
    _path_kernel[(b,)](logp, token_lens.contiguous(), mel_lens.contiguous(), score, advanced,
                       path, tm, tt, BLOCK=triton.next_power_of_2(tt))
    return path


@triton.jit
def _lse3(a, b, c):
    m = tl.maximum(tl.maximum(a, b), c)
    safe = tl.where(m == float("-inf"), 0.0, m)
    return safe + tl.log(tl.exp(a - safe) + tl.exp(b - safe) + tl.exp(c - safe))


@triton.jit
def _lse_where(v, keep):
    # log-sum-exp of the lanes of v (BLOCK,) where keep; -inf where none is kept
    last = tl.where(keep, v, float("-inf"))
    top = tl.max(last, axis=0)
    top_safe = tl.where(top == float("-inf"), 0.0, top)
    return top_safe + tl.log(tl.sum(tl.where(keep, tl.exp(last - top_safe), 0.0), axis=0))


@triton.jit
def _ctc_frame_grad(grad_t, x_t, post, label, token, valid, C, BLOCK: tl.constexpr):
    # One frame's gradient (C,) at grad_t from the states' posteriors post (BLOCK,). Per class:
    # a token has one state, the blank sums its N + 1. Written per state, read back per class
    # to add exp(x) (ATen's convention).
    tl.store(grad_t + label, -post, mask=valid & token)
    tl.store(grad_t, -tl.sum(tl.where(token, 0.0, post), axis=0))
    tl.debug_barrier()
    cls = tl.arange(0, BLOCK)
    g = tl.load(grad_t + cls, mask=cls < C, other=0.0)
    x_all = tl.load(x_t + cls, mask=cls < C, other=float("-inf")).to(tl.float32)
    tl.store(grad_t + cls, tl.exp(x_all) + g, mask=cls < C)


@triton.jit
def _ctc_kernel(x_ptr, tok_ptr, mel_ptr, alpha_ptr, beta_ptr, nll_ptr, grad_ptr, TM, C, S,
                BLOCK: tl.constexpr):
    # x (B, TM, C) log-probabilities, C = 1 + Tt; alpha (B, TM, S) and beta (B, S) scratch;
    # nll (B,); grad (B, TM, C), zeroed by the caller. State s of a row with N tokens:
    # even = blank, odd = token (s + 1) / 2; a path starts in state 0 or 1, ends in 2N or
    # 2N - 1, and moves by 0 or 1 state a frame, or by 2 from one token to the next.
    NEG: tl.constexpr = float("-inf")
    b = tl.program_id(0).to(tl.int64)
    n_tok = tl.load(tok_ptr + b).to(tl.int64)
    n_frm = tl.load(mel_ptr + b).to(tl.int64)
    s = tl.arange(0, BLOCK)
    valid = s < 2 * n_tok + 1
    token = (s % 2) == 1
    label = tl.where(token, (s + 1) // 2, 0)
    x_row = x_ptr + b * TM * C
    alpha_row = alpha_ptr + b * TM * S
    beta_row = beta_ptr + b * S
    grad_row = grad_ptr + b * TM * C

    # Forward: alpha[t, s], the log-probability of the paths that emit frames 0..t and are
    # in state s at frame t.
    x0 = tl.load(x_row + label, mask=valid, other=NEG).to(tl.float32)
    alpha = tl.where(s < 2, x0, NEG)
    tl.store(alpha_row + s, alpha, mask=s < S)
    tl.debug_barrier()
    for t in range(1, n_frm):
        back1 = tl.load(alpha_row + (t - 1) * S + s - 1, mask=valid & (s >= 1), other=NEG)
        back2 = tl.load(alpha_row + (t - 1) * S + s - 2, mask=valid & (s >= 2) & token, other=NEG)
        xt = tl.load(x_row + t * C + label, mask=valid, other=NEG).to(tl.float32)
        alpha = tl.where(valid, _lse3(alpha, back1, back2) + xt, NEG)
        tl.store(alpha_row + t * S + s, alpha, mask=s < S)
        tl.debug_barrier()
    # (A scalar condition is spread over the block first: the interpreter cannot AND a block
    # with a scalar.)
    end = valid & (s >= 2 * n_tok - 1) & ((s * 0 + n_frm) > 0)
    log_z = _lse_where(alpha, end)
    finite = log_z > NEG
    tl.store(nll_ptr + b, tl.where(finite, -log_z, 0.0))

    # Backward, only where a path exists (elsewhere loss and gradient stay 0): beta[t, s], the
    # log-probability of emitting frames t..end from state s at frame t, and from alpha and
    # beta each state's posterior at each frame.
    n_back = tl.where(finite, n_frm, 0)
    beta = tl.full([BLOCK], NEG, dtype=tl.float32)
    for i in range(0, n_back):
        t = n_frm - 1 - i
        xt = tl.load(x_row + t * C + label, mask=valid, other=NEG).to(tl.float32)
        later = valid & ((s * 0 + i) > 0)  # the last frame has no later frame to come from
        next1 = tl.load(beta_row + s + 1, mask=later & (s + 1 < 2 * n_tok + 1), other=NEG)
        next2 = tl.load(beta_row + s + 2, mask=later & token & (s + 2 < 2 * n_tok + 1), other=NEG)
        beta = tl.where(i == 0, tl.where(end, xt, NEG), tl.where(valid, _lse3(beta, next1, next2) + xt, NEG))
        tl.debug_barrier()  # every thread has read the old row before it is overwritten
        tl.store(beta_row + s, beta, mask=s < S)
        alpha = tl.load(alpha_row + t * S + s, mask=valid, other=NEG)
        post = tl.where(valid, tl.exp(alpha + beta - xt - log_z), 0.0)  # (BLOCK,) per state
        _ctc_frame_grad(grad_row + t * C, x_row + t * C, post, label, token, valid, C, BLOCK)


def triton_ctc_forward_sum(x: Tensor, token_lens: Tensor, mel_lens: Tensor) -> tuple[Tensor, Tensor]:
    """models.monotonic.ctc_forward_sum on the tensors' device."""
    b, tm, c = x.shape
    x = x.detach().float().contiguous()
    nll = torch.zeros(b, dtype=torch.float32, device=x.device)
    grad = torch.zeros(b, tm, c, dtype=torch.float32, device=x.device)
    if b == 0 or tm == 0:
        return nll, grad
    s = 2 * (c - 1) + 1
    alpha = torch.empty(b, tm, s, dtype=torch.float32, device=x.device)
    beta = torch.empty(b, s, dtype=torch.float32, device=x.device)
    _ctc_kernel[(b,)](x, token_lens.contiguous(), mel_lens.contiguous(), alpha, beta, nll, grad,
                      TM=tm, C=c, S=s, BLOCK=triton.next_power_of_2(max(s, c)))
    return nll, grad
