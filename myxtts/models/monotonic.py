"""The aligner's two dynamic programs over monotonic paths of frames through tokens, as PyTorch
custom ops that run on the device their tensors live on:

- ``monotonic_path``: the single most probable path (monotonic alignment search, Glow-TTS), the
  hard alignment that gives the duration decoder its durations;
- ``ctc_forward_sum``: minus the log of the summed probability of every path, per utterance,
  with its gradient (the CTC forward-backward algorithm, RAD-TTS's forward-sum loss).

Both are sequential in time: frame t needs frame t - 1 for every token. A loop over frames
written in tensor ops would launch a few kernels per frame (thousands per step) or unroll into
a graph as long as the longest clip; ATen's own CTC loss reads both length tensors back to the
host on CUDA, and its output shape depends on their values, so dynamo breaks the graph around
it. As custom ops, each is one node in the compiled step, with a fake implementation for
tracing, and reads nothing back to the host:

- on CUDA, a Triton kernel (``models.monotonic_triton``): one program per utterance loops over
  its frames, vectorised over tokens (or CTC states), with the lengths read on the device;
- on the CPU, the numpy search and ATen's CTC loss, which on a CPU cost no copy.

``run_on_host(True)`` (``train.aligner_on_host``) sends CUDA tensors to the CPU implementations
instead: a copy to the host and back per op, each a host sync, for a Triton that cannot build
the kernels. A captured CUDA graph cannot hold such a copy, so the run compiles without graphs.

Both implementations give the same path bit for bit and the same loss and gradient to float
rounding (tests/models/test_monotonic.py; the Triton kernels run there under
``TRITON_INTERPRET=1``).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


@torch.library.custom_op("myxtts::monotonic_path", mutates_args=())
def monotonic_path(logp: Tensor, token_lens: Tensor, mel_lens: Tensor) -> Tensor:
    """logp (B, Tm, Tt) → the most probable monotonic path as a 0/1 float32 matrix (B, Tm, Tt).
    Each of a row's ``mel_lens`` frames takes exactly one token; its ``token_lens`` tokens are
    visited in order, from the first at frame 0 to the last at the final frame, each for at
    least one frame when there are at least as many frames as tokens. Padded frames are 0.
    Not differentiable: the path is a target, not a prediction."""
    lp = logp.detach().float().numpy()
    return torch.from_numpy(search(lp, token_lens.numpy(), mel_lens.numpy()))


@monotonic_path.register_fake
def _(logp, token_lens, mel_lens):
    return logp.new_empty(logp.shape, dtype=torch.float32)


_ON_HOST = False  # CUDA tensors go through the CPU implementations (see run_on_host)


def run_on_host(on: bool) -> None:
    """Route both ops on CUDA tensors to their CPU implementations (``on``) or to the Triton
    kernels (the default)."""
    global _ON_HOST
    _ON_HOST = bool(on)


@monotonic_path.register_kernel("cuda")
def _path_cuda(logp, token_lens, mel_lens):
    if _ON_HOST:
        return monotonic_path(logp.cpu(), token_lens.cpu(), mel_lens.cpu()).to(logp.device)
    from myxtts.models.monotonic_triton import triton_monotonic_path
    return triton_monotonic_path(logp, token_lens, mel_lens)


def search(lp: np.ndarray, n_lens: np.ndarray, t_lens: np.ndarray) -> np.ndarray:
    """The reference search, in numpy: a loop over frames, each a vector operation over the
    batch and the tokens, scores in float64. score[t, n] is the best log-probability of a path
    that is at token n at frame t; it came from n - 1 when that path scored strictly more."""
    b, tm, tt = lp.shape
    score = np.full((b, tt), -np.inf)  # (B, Tt) at the current frame
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


@torch.library.custom_op("myxtts::ctc_forward_sum", mutates_args=())
def ctc_forward_sum(x: Tensor, token_lens: Tensor, mel_lens: Tensor) -> tuple[Tensor, Tensor]:
    """CTC over log-probabilities x (B, Tm, 1 + Tt) (class 0 the blank, each frame's row
    normalised) with the target tokens 1..N of each row in order → (nll (B,) float32, grad
    (B, Tm, 1 + Tt) float32): minus the log-probability of all paths, 0 where no path fits
    (ATen's ``zero_infinity``), and its gradient in ATen's convention, exp(x) - posterior,
    which is the gradient with respect to the logits that x is the log_softmax of."""
    lp = x.float().transpose(0, 1)  # (Tm, B, 1 + Tt), as ATen takes it
    targets = torch.arange(1, x.shape[2], dtype=torch.long).expand(x.shape[0], -1)
    t_lens, n_lens = mel_lens.tolist(), token_lens.tolist()
    nll, log_alpha = torch.ops.aten._ctc_loss(lp, targets, t_lens, n_lens, blank=0, zero_infinity=True)  # (B,)
    grad = torch.ops.aten._ctc_loss_backward(torch.ones_like(nll), lp, targets, t_lens, n_lens, nll,
                                             log_alpha, blank=0, zero_infinity=True)  # (Tm, B, 1 + Tt)
    return torch.where(torch.isinf(nll), torch.zeros_like(nll), nll), grad.transpose(0, 1).contiguous()


@ctc_forward_sum.register_fake
def _(x, token_lens, mel_lens):
    return x.new_empty(x.shape[:1], dtype=torch.float32), x.new_empty(x.shape, dtype=torch.float32)


@ctc_forward_sum.register_kernel("cuda")
def _ctc_cuda(x, token_lens, mel_lens):
    if _ON_HOST:
        nll, grad = ctc_forward_sum(x.cpu(), token_lens.cpu(), mel_lens.cpu())
        return nll.to(x.device), grad.to(x.device)
    from myxtts.models.monotonic_triton import triton_ctc_forward_sum
    return triton_ctc_forward_sum(x, token_lens, mel_lens)


def _ctc_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])


def _ctc_backward(ctx, grad_nll, _grad_grad):
    (grad,) = ctx.saved_tensors
    return grad * grad_nll[:, None, None], None, None


ctc_forward_sum.register_autograd(_ctc_backward, setup_context=_ctc_setup)


def check_device(device: torch.device, seed: int = 0) -> str | None:
    """Run both ops on ``device`` on a small random batch and compare them with the CPU
    implementations: None when they agree, else one line saying what failed (a kernel that
    does not build, or a wrong answer)."""
    g = torch.Generator().manual_seed(seed)
    token_lens, mel_lens = torch.tensor([5, 9, 3]), torch.tensor([20, 31, 7])
    logp = torch.log_softmax(torch.randn(3, 32, 9, generator=g), dim=-1)  # (B, Tm, Tt)
    x = torch.log_softmax(torch.randn(3, 32, 10, generator=g), dim=-1)  # (B, Tm, 1 + Tt)
    try:
        on = [t.to(device) for t in (logp, token_lens, mel_lens)]
        path = monotonic_path(*on).cpu()
        nll, grad = (t.cpu() for t in ctc_forward_sum(x.to(device), *on[1:]))
    except Exception as e:  # a Triton that cannot build or launch the kernels: say what it said
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]
    want_nll, want_grad = ctc_forward_sum(x, token_lens, mel_lens)
    if not torch.equal(path, monotonic_path(logp, token_lens, mel_lens)):
        return "the alignment search on the device disagrees with the CPU reference"
    if not (torch.allclose(nll, want_nll, rtol=1e-4, atol=1e-4) and torch.allclose(grad, want_grad, atol=5e-4)):
        return "the CTC loss on the device disagrees with the CPU reference"
    return None
