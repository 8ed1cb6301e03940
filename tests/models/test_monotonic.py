"""The aligner's custom ops (models.monotonic): registered soundly for tracing and autograd, and
their Triton kernels, run on the CPU by Triton's interpreter, give the reference's path bit for
bit and ATen's CTC loss and gradient, on random batches with the edge cases and on a real one."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from myxtts.models.aligner import MASKED
from myxtts.models.monotonic import ctc_forward_sum, monotonic_path, search

ROOT = Path(__file__).resolve().parents[2]


def cases():
    """(name, logp (B, Tm, Tt), token_lens, mel_lens): padded tokens MASKED, as the aligner
    gives them, and rows with one token, as many tokens as frames, fewer frames than tokens
    (no path fits) and no frames at all."""
    g = torch.Generator().manual_seed(0)
    out = []
    token_lens = torch.tensor([12, 1, 9, 12, 5, 3])
    mel_lens = torch.tensor([40, 17, 9, 7, 0, 33])
    logp = torch.log_softmax(torch.randn(6, 40, 12, generator=g) * 4, dim=-1)
    for b, n in enumerate(token_lens.tolist()):
        logp[b, :, n:] = MASKED
    out.append(("edge cases", logp, token_lens, mel_lens))
    flat = torch.zeros(3, 24, 8)  # every path ties: the tie-break decides
    out.append(("ties", flat, torch.tensor([8, 5, 2]), torch.tensor([24, 11, 24])))
    out.append(("real batch", *_real_logp()))
    return out


def _real_logp():
    """The tiny model's aligner on real LJSpeech clips (padded as the loader pads)."""
    from myxtts.models.mel_decoder import normalize_mel
    from myxtts.models.xtts import XTTS

    from .conftest import lj_batch, lj_rows, tiny

    cfg = tiny("model.decoder=duration")
    batch, vocab = lj_batch(cfg, [r[0] for r in lj_rows()[:4]])
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(vocab), cfg.audio.n_mels)
    with torch.no_grad():
        text, _ = model.text_encoder(batch["tokens"], batch["token_lens"])
        logp = model.decoder.aligner(text, normalize_mel(batch["mel"]), batch["token_lens"],
                                     batch["mel_lens"])
    return logp, batch["token_lens"], batch["mel_lens"]


def compare_triton_with_reference() -> None:
    """Run with TRITON_INTERPRET=1 (set before triton is imported): raises on any mismatch."""
    from myxtts.models.monotonic_triton import triton_ctc_forward_sum, triton_monotonic_path

    np.seterr(all="ignore")  # the interpreter's log(0) = -inf is intended
    for name, logp, token_lens, mel_lens in cases():
        want = torch.from_numpy(search(logp.float().numpy(), token_lens.numpy(), mel_lens.numpy()))
        got = triton_monotonic_path(logp, token_lens, mel_lens)
        assert torch.equal(got, want), f"{name}: path differs in {int((got != want).sum())} cells"
        x = torch.log_softmax(F.pad(logp, (1, 0), value=-1.0), dim=-1)
        nll_ref, grad_ref = ctc_forward_sum(x, token_lens, mel_lens)
        nll, grad = triton_ctc_forward_sum(x, token_lens, mel_lens)
        torch.testing.assert_close(nll, nll_ref, rtol=1e-5, atol=1e-4, msg=name)
        # float32 sums over up to 800 frames, in another order than ATen's
        torch.testing.assert_close(grad, grad_ref, rtol=1e-3, atol=5e-4, msg=name)
        print(f"{name}: path equal, nll {nll.tolist()}")


def test_triton_kernels_match_the_reference_search_and_atens_ctc():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    code = "from tests.models.test_monotonic import compare_triton_with_reference as c; c()"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("path equal") == 3, done.stdout  # every case ran


def test_reference_edge_cases():
    """The search's own answers where they are forced: no frames → no path; fewer frames than
    tokens → one token a frame, ending on the last, and a CTC loss of 0; one token → every frame on it."""
    (_, logp, token_lens, mel_lens), *_ = cases()
    path = monotonic_path(logp, token_lens, mel_lens)
    assert path[4].sum() == 0  # no frames
    assert path[1, :17, 0].eq(1).all() and path[1].sum() == 17  # one token
    assert path[2, :9].argmax(dim=1).tolist() == list(range(9))  # tokens == frames
    # No path fits 12 tokens into 7 frames: each frame still takes one token, the last the last.
    assert path[3, :7].sum(dim=1).eq(1).all() and path[3, 6, 11] == 1 and path[3, 7:].sum() == 0
    nll, _ = ctc_forward_sum(torch.log_softmax(F.pad(logp, (1, 0)), dim=-1), token_lens, mel_lens)
    assert nll[3] == 0 and nll[4] == 0 and bool((nll[[0, 1, 2, 5]] > 0).all())


def test_ops_trace_as_single_nodes_with_sound_registrations():
    """torch.library's own checks (fake tensors, dynamo, autograd registration), and both ops
    inside one fullgraph compiled function whose gradients match eager."""
    (_, logp, token_lens, mel_lens), *_ = cases()
    torch.library.opcheck(monotonic_path, (logp, token_lens, mel_lens))
    x = torch.log_softmax(F.pad(logp, (1, 0), value=-1.0), dim=-1).requires_grad_()
    torch.library.opcheck(ctc_forward_sum, (x, token_lens, mel_lens),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))

    def fn(logits):
        lp = torch.log_softmax(logits, dim=-1)
        path = monotonic_path(lp.detach(), token_lens, mel_lens)
        nll, _ = ctc_forward_sum(lp, token_lens, mel_lens)
        return (nll * path.sum(dim=(1, 2))).sum()

    logits = torch.randn(6, 40, 13, requires_grad=True)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    (g_c,) = torch.autograd.grad(compiled(logits), logits)
    (g_e,) = torch.autograd.grad(fn(logits), logits)
    torch.testing.assert_close(g_c, g_e)
    assert g_e.abs().sum() > 0
