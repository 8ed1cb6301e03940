"""The aligner's custom ops (models.monotonic): registered soundly for tracing and autograd, and
their Triton kernels, run on the CPU by Triton's interpreter, give the reference's path bit for
bit and ATen's CTC loss and gradient, on random batches with the edge cases and on a real one."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from benchmarks.gpu_kernels import cases as kernel_cases
from myxtts.models.monotonic import ctc_forward_sum, monotonic_path

ROOT = Path(__file__).resolve().parents[2]


def cases():
    """(name, logp (B, Tm, Tt), token_lens, mel_lens): the kernel check's own, the first with
    padded tokens MASKED, as the aligner gives them, and rows with one token, as many tokens as
    frames, fewer frames than tokens (no path fits) and no frames at all."""
    return kernel_cases((4, 96, 32))


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


REAL_BATCH = """
import numpy as np, torch
from benchmarks.gpu_kernels import compare
from myxtts.models.monotonic_triton import triton_ctc_forward_sum, triton_monotonic_path
from tests.models.test_monotonic import _real_logp
np.seterr(all="ignore")
r = compare(("real batch", *_real_logp()), triton_monotonic_path, triton_ctc_forward_sum)
assert r["ok"], r
print("real batch ok")
"""


def test_triton_kernels_match_the_reference_search_and_atens_ctc(tmp_path):
    """benchmarks/gpu_kernels.py as the test suite runs it (Triton's interpreter on a CPU): the
    edge cases, ties and a random batch; then the same comparison on a real batch."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    report = tmp_path / "kernels.json"
    # the two run side by side: each is one interpreted process, mostly on one core
    kernels = subprocess.Popen([sys.executable, "benchmarks/gpu_kernels.py", "--json", str(report)],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    real = subprocess.Popen([sys.executable, "-c", REAL_BATCH], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = kernels.communicate(timeout=600)
    assert kernels.returncode == 0, out[-3000:] + err[-3000:]
    r = json.loads(report.read_text())
    assert r["interpreted"] and r["ok"] and r["status"] == "done", r
    assert [c["case"] for c in r["cases"]] == ["edge cases", "ties", "random 4x96x32"]
    assert all(c["path_equal"] and c["ok"] for c in r["cases"]) and "CUDA" in r["not_run"]
    out, err = real.communicate(timeout=600)
    assert real.returncode == 0 and "real batch ok" in out, err[-3000:]


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


def test_the_host_route_gives_the_reference_answers(monkeypatch):
    """train.aligner_on_host: the CUDA implementations hand their tensors to the CPU ones (run
    here on CPU tensors, where the copies are no-ops) and give their answers unchanged."""
    from myxtts.models import monotonic

    (_, logp, token_lens, mel_lens), *_ = cases()
    x = torch.log_softmax(F.pad(logp, (1, 0), value=-1.0), dim=-1)
    monkeypatch.setattr(monotonic, "_ON_HOST", False)
    monotonic.run_on_host(True)
    assert torch.equal(monotonic._path_cuda(logp, token_lens, mel_lens), monotonic_path(logp, token_lens, mel_lens))
    for got, want in zip(monotonic._ctc_cuda(x, token_lens, mel_lens), ctc_forward_sum(x, token_lens, mel_lens)):
        assert torch.equal(got, want)


def test_the_device_check_says_what_failed(monkeypatch):
    from myxtts.models import monotonic

    assert monotonic.check_device(torch.device("cpu")) is None

    def broken(*args):
        raise RuntimeError("CompilationError at 41:8: unsupported loop bound\nmore lines")

    monkeypatch.setattr(monotonic, "monotonic_path", broken)
    said = monotonic.check_device(torch.device("cpu"))
    assert said == "RuntimeError: CompilationError at 41:8: unsupported loop bound"
