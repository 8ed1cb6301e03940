"""The aligner's Triton kernels against their host reference, on the GPU they will train on.

    python benchmarks/gpu_kernels.py [--json OUT.json] [--size B,TM,TT] [--timeout-s 240]

The duration decoder (the default model) runs its alignment search and CTC loss as two Triton
kernels on CUDA, in every compile mode and in the batch-size probe: a Triton that builds them
wrongly, or not at all, stops or spoils every run. This checks, in order:

1. **cases**: both kernels against the host reference (the numpy search, ATen's CTC) on edge
   cases (one token, as many tokens as frames, fewer frames than tokens, no frames, ties) and on
   a random batch at training size: the path bit for bit, the loss within 1e-4, the gradient
   within 5e-4;
2. **dispatcher** (CUDA): the same through ``torch.ops.myxtts``, as the model calls them;
3. **opcheck** (CUDA): ``torch.library.opcheck`` on CUDA tensors;
4. **cuda graph** (CUDA): both ops captured in one CUDA graph and replayed, against eager;
5. **timing** (CUDA): the median time of each kernel at the training size.

Under ``TRITON_INTERPRET=1`` on a CPU (how the test suite runs it) the kernels run in Triton's
interpreter on CPU tensors and only the cases run; the CUDA checks are reported as not run.
It stops itself after ``--timeout-s`` seconds with what it has. Exit status 0 when every check
that ran passed.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from myxtts.models.aligner import MASKED  # noqa: E402
from myxtts.models.monotonic import ctc_forward_sum, monotonic_path  # noqa: E402

LOSS_TOL, GRAD_TOL = 1e-4, 5e-4
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def logp_batch(token_lens, mel_lens, tm: int, tt: int, seed: int, scale: float = 4.0):
    """Aligner-like log-probabilities (B, Tm, Tt), padded tokens MASKED as the aligner gives them."""
    g = torch.Generator().manual_seed(seed)
    logp = torch.log_softmax(torch.randn(len(token_lens), tm, tt, generator=g) * scale, dim=-1)
    for b, n in enumerate(token_lens):
        logp[b, :, n:] = MASKED
    return logp, torch.tensor(token_lens), torch.tensor(mel_lens)


def cases(size: tuple[int, int, int]) -> list[tuple]:
    """(name, logp, token_lens, mel_lens): edge cases, ties, and a random batch of ``size``."""
    b, tm, tt = size
    g = np.random.default_rng(1)
    toks = g.integers(max(1, tt // 3), tt + 1, size=b).tolist()
    frames = [int(min(tm, max(n, g.integers(tm // 2, tm + 1)))) for n in toks]
    return [("edge cases", *logp_batch([12, 1, 9, 12, 5, 3], [40, 17, 9, 7, 0, 33], 40, 12, 0)),
            ("ties", torch.zeros(3, 24, 8), torch.tensor([8, 5, 2]), torch.tensor([24, 11, 24])),
            (f"random {b}x{tm}x{tt}", *logp_batch(toks, frames, tm, tt, 2))]


def ctc_input(logp):
    """The forward-sum loss's input: a blank class in front, each frame renormalised."""
    return torch.log_softmax(F.pad(logp, (1, 0), value=-1.0), dim=-1)


def compare(case, run_path, run_ctc) -> dict:
    """``run_path``/``run_ctc`` (the kernels, however reached) against the host reference on one
    case. → {"case", "path_equal", "nll_max_diff", "grad_max_diff", "ok"}."""
    name, logp, token_lens, mel_lens = case
    want_path = monotonic_path(logp, token_lens, mel_lens)  # CPU tensors: the host reference
    x = ctc_input(logp)
    want_nll, want_grad = ctc_forward_sum(x, token_lens, mel_lens)
    path = run_path(logp, token_lens, mel_lens).cpu()
    nll, grad = (t.cpu() for t in run_ctc(x, token_lens, mel_lens))
    out = {"case": name, "path_equal": bool(torch.equal(path, want_path)),
           "nll_max_diff": float((nll - want_nll).abs().max()) if nll.numel() else 0.0,
           "grad_max_diff": float((grad - want_grad).abs().max()) if grad.numel() else 0.0}
    out["ok"] = out["path_equal"] and out["nll_max_diff"] <= LOSS_TOL and out["grad_max_diff"] <= GRAD_TOL
    return out


def on(device, fn):
    """``fn`` called with its tensors moved to ``device``."""
    return lambda *ts: fn(*(t.to(device) for t in ts))


def cuda_checks(size, report: dict) -> None:
    dev = torch.device("cuda")
    ops = torch.ops.myxtts
    report["dispatcher"] = [compare(c, on(dev, ops.monotonic_path), on(dev, ops.ctc_forward_sum))
                            for c in cases(size)]
    _, logp, token_lens, mel_lens = cases(size)[-1]
    logp, token_lens, mel_lens = logp.to(dev), token_lens.to(dev), mel_lens.to(dev)
    x = ctc_input(logp).requires_grad_()
    try:
        torch.library.opcheck(monotonic_path, (logp, token_lens, mel_lens))
        torch.library.opcheck(ctc_forward_sum, (x, token_lens, mel_lens),
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))
        report["opcheck"] = {"ok": True}
    except Exception as e:  # what opcheck found is the result
        report["opcheck"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}

    xd = x.detach()
    eager = (ops.monotonic_path(logp, token_lens, mel_lens), *ops.ctc_forward_sum(xd, token_lens, mel_lens))
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up outside the capture, as torch's docs ask
            ops.monotonic_path(logp, token_lens, mel_lens)
            ops.ctc_forward_sum(xd, token_lens, mel_lens)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = (ops.monotonic_path(logp, token_lens, mel_lens), *ops.ctc_forward_sum(xd, token_lens, mel_lens))
        for t in captured:
            t.zero_()
        graph.replay()
        torch.cuda.synchronize()
        same = [bool(torch.equal(captured[0], eager[0])),
                float((captured[1] - eager[1]).abs().max()) <= LOSS_TOL,
                float((captured[2] - eager[2]).abs().max()) <= GRAD_TOL]
        report["cuda_graph"] = {"ok": all(same), "path_equal": same[0], "loss_close": same[1], "grad_close": same[2]}
    except Exception as e:
        report["cuda_graph"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}

    report["timing_ms"] = {"shape": list(size),
                           "monotonic_path": median_ms(lambda: ops.monotonic_path(logp, token_lens, mel_lens)),
                           "ctc_forward_sum": median_ms(lambda: ops.ctc_forward_sum(xd, token_lens, mel_lens))}


def median_ms(fn, n: int = 20) -> float:
    """The median of ``n`` calls of ``fn`` on the GPU's clock (CUDA events), in milliseconds."""
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the report here")
    p.add_argument("--size", default=None, help="B,TM,TT of the training-size batch (default 64,640,192 "
                   "on CUDA, the largest bucket of base on the demo corpus rounded up; 4,96,32 interpreted)")
    p.add_argument("--timeout-s", type=float, default=240.0, help="stop after this long, with what has run")
    a = p.parse_args(argv)
    size = tuple(int(v) for v in (a.size or ("4,96,32" if INTERPRETED else "64,640,192")).split(","))
    report: dict = {"torch": torch.__version__, "interpreted": INTERPRETED, "size": list(size)}
    try:
        import triton
        report["triton"] = triton.__version__
    except ImportError:
        report["triton"] = None

    def finish(status: str) -> int:
        checks = [c for key in ("cases", "dispatcher") for c in report.get(key, [])]
        checks += [report[k] for k in ("opcheck", "cuda_graph") if k in report]
        report["status"] = status
        report["ok"] = status == "done" and bool(checks) and all(c["ok"] for c in checks)
        text = json.dumps(report, indent=1)
        if a.json:
            Path(a.json).write_text(text + "\n")
        print(text)
        return 0 if report["ok"] else 1

    def out_of_time(signum, frame):
        raise TimeoutError

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(max(1, int(a.timeout_s)))
    t0 = time.perf_counter()
    try:
        if report["triton"] is None:
            report["error"] = "triton is not installed"
            return finish("failed")
        from myxtts.models.monotonic_triton import triton_ctc_forward_sum, triton_monotonic_path

        np.seterr(all="ignore")  # the interpreter's log(0) = -inf is intended
        dev = torch.device("cuda") if torch.cuda.is_available() and not INTERPRETED else torch.device("cpu")
        report["cases"] = [compare(c, on(dev, triton_monotonic_path), on(dev, triton_ctc_forward_sum))
                           for c in cases(size)]
        if dev.type == "cuda":
            report["device"] = torch.cuda.get_device_name()
            cuda_checks(size, report)
        else:
            report["not_run"] = "dispatcher, opcheck, CUDA graph and timing need a CUDA GPU"
        report["seconds"] = round(time.perf_counter() - t0, 1)
        return finish("done")
    except TimeoutError:
        report["error"] = f"stopped by its own timeout of {a.timeout_s:g} s"
        return finish("timed out")
    except Exception as e:  # a kernel that does not build: the report says what Triton said
        report["error"] = f"{type(e).__name__}: {e}"[:2000]
        return finish("failed")
    finally:
        signal.alarm(0)


if __name__ == "__main__":
    sys.exit(main())
