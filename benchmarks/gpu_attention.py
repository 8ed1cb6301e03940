"""Which attention kernel serves the model's padded attention best on this GPU, and does each
agree with the exact computation?

    python benchmarks/gpu_attention.py [--json OUT.json] [--config base] [--shapes B,TT,TM;...]
        [--timeout-s 25]

Every attention of the model is ``F.scaled_dot_product_attention`` with a key-padding bias
(B, 1, 1, Tk) and dropout in training (``models/layers.py``). A bias keeps SDPA off its Flash
kernel, so on a GPU it runs the memory-efficient one. The candidates, each forward and backward
in bf16 on the batch shapes of the H100 run of 2026-11-27 (``--shapes``), for the two attentions that
dominate the duration decoder's FLOPs, its frames over themselves and over the memory (text and
conditioning latents):

    efficient     the memory-efficient kernel with the bias (what the step runs today)
    cudnn         cuDNN's fused attention with the bias (Flash-class on Hopper)
    flash_folded  the Flash kernel without a mask: the bias rides in an extra key dimension
                  against a query dimension of ones (head size 64 -> 72, which FlashAttention-2
                  runs as its 96-wide kernel: 1.5x the matmul work, for a kernel without a mask)
    math          the exact computation in fp32, the reference

For each: the largest error of the output and of the query, key and value gradients against
the reference over the real rows (dropout off), relative to the reference's largest value; the
median time of a forward and backward with the model's dropout (CUDA events); and whether that
forward and backward captures in a CUDA graph and replays, as the compiled step does.

On a CPU (how the test suite runs it) the reference and the CPU's own kernels run at toy size,
in fp32: ``default`` (what SDPA picks there with the bias) and ``flash_folded``; the CUDA
kernels, timings and graphs are reported as not run. It stops itself after ``--timeout-s``
seconds (or on SIGTERM) with what it has. Exit status 0 when it ran to the end, today's kernel
(``efficient``; ``default`` on a CPU) ran, and every candidate that ran agreed with the
reference; a kernel that refuses the inputs, the dropout or a CUDA graph is a finding the report
states, not a failure of the check.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_kernels import median_ms  # noqa: E402

from myxtts.config import load  # noqa: E402
from myxtts.models.layers import attention_bias  # noqa: E402

# the batch shapes (B, Tt, Tm) of base on the demo corpus x8, H100, 2026-11-27 (bench_eager_amp.json):
# the smallest, a middle and the longest bucket
H100_SHAPES = "208,48,128;101,96,384;62,160,624"
CPU_SHAPES = "3,7,12;2,5,20"
FOLD = 8  # extra head dimensions of flash_folded: one for the bias, the rest zeros (multiples of 8)
FOLD_BIAS = -30000.0  # the folded bias of a padded key: exp(scale * this) is 0 in bf16 and fp32
TOL = {torch.bfloat16: 0.02, torch.float32: 1e-4}  # relative error a candidate may have


class OutOfTime(BaseException):
    """--timeout-s or SIGTERM: not an Exception, so no candidate's own handler takes it for a
    kernel's refusal."""


def lengths(n: int, full: int, seed: int) -> torch.Tensor:
    """Real lengths of ``n`` rows padded to ``full``: the first row full, the last half of it
    (padding to mask wherever there are two rows), the others from half up."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(max(1, full // 2), full + 1, (n,), generator=g)
    lens[-1] = max(1, full // 2)
    lens[0] = full
    return lens


def case(b: int, h: int, dh: int, tq: int, tk: int, q_lens, k_lens, dtype, device, seed: int) -> dict:
    """q, k, v (B, H, T, dh) as views of one projection, as ``Attention._split`` makes them, the
    additive bias (B, 1, 1, Tk) and the masks of the real query rows and keys."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(b * max(tq, tk), 3 * h * dh, generator=g).to(device, dtype)
    q, k, v = qkv.view(b, -1, 3, h, dh).permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, T, dh) each
    q, k, v = q[:, :, :tq], k[:, :, :tk], v[:, :, :tk]
    keys = torch.arange(tk, device=device) < k_lens.to(device)[:, None]  # (B, Tk)
    rows = torch.arange(tq, device=device) < q_lens.to(device)[:, None]  # (B, Tq)
    grad = torch.randn(b, h, tq, dh, generator=g).to(device, dtype) * rows[:, None, :, None]
    return {"q": q, "k": k, "v": v, "keys": keys, "rows": rows, "bias": attention_bias(keys, dtype), "grad": grad}


def folded(q, k, v, keys, p: float):
    """Attention without a mask: the key-padding bias as one more key dimension, met by a query
    dimension of ones; the scale stays the true head size's. The output keeps the first dh."""
    dh = q.shape[-1]
    one = torch.ones(*q.shape[:-1], 1, dtype=q.dtype, device=q.device)
    zq = torch.zeros(*q.shape[:-1], FOLD - 1, dtype=q.dtype, device=q.device)
    kb = torch.where(keys, 0.0, FOLD_BIAS).to(k.dtype)[:, None, :, None].expand(*k.shape[:-1], 1)
    zk = torch.zeros(*k.shape[:-1], FOLD - 1, dtype=k.dtype, device=k.device)
    zv = torch.zeros(*v.shape[:-1], FOLD, dtype=v.dtype, device=v.device)
    y = F.scaled_dot_product_attention(torch.cat([q, one, zq], -1), torch.cat([k, kb, zk], -1),
                                       torch.cat([v, zv], -1), dropout_p=p, scale=1 / math.sqrt(dh))
    return y[..., :dh]


CANDIDATES = {  # name: (backend or None for SDPA's own choice, folded)
    "efficient": (SDPBackend.EFFICIENT_ATTENTION, False),
    "cudnn": (SDPBackend.CUDNN_ATTENTION, False),
    "flash_folded": (SDPBackend.FLASH_ATTENTION, True),
    "default": (None, False),
    "math": (SDPBackend.MATH, False),  # the reference, in fp32
}


def attend(name: str, c: dict, p: float, q=None, k=None, v=None):
    backend, fold = CANDIDATES[name]
    q, k, v = (c["q"], c["k"], c["v"]) if q is None else (q, k, v)
    with sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext():
        if fold:
            return folded(q, k, v, c["keys"], p)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=c["bias"].to(q.dtype), dropout_p=p)


def forward_backward(name: str, c: dict, p: float, dtype=None):
    """Output and (dq, dk, dv) of one candidate, in ``dtype`` (the case's by default)."""
    q, k, v = (t.detach().to(dtype or t.dtype).requires_grad_() for t in (c["q"], c["k"], c["v"]))
    y = attend(name, c, p, q, k, v)
    grads = torch.autograd.grad(y, (q, k, v), c["grad"].to(y.dtype))
    return y.detach(), grads


def agreement(name: str, c: dict, ref, today: dict | None) -> dict:
    """Largest errors against the fp32 reference over real query rows and real keys, relative to
    the reference's largest value. A candidate agrees when each is within ``TOL`` or within twice
    what today's kernel (``today``'s errors; none on a CPU) gets on the same inputs."""
    y, (dq, dk, dv) = forward_backward(name, c, 0.0)
    ry, (rdq, rdk, rdv) = ref
    rows, keys = c["rows"][:, None, :, None], c["keys"][:, None, :, None]

    def rel(a, r, m):
        return float(((a.float() - r) * m).abs().max() / r.abs().max().clamp_min(1e-12))

    out = {"out": rel(y, ry, rows), "dq": rel(dq, rdq, rows), "dk": rel(dk, rdk, keys), "dv": rel(dv, rdv, keys)}
    tol = TOL[c["q"].dtype]
    out["ok"] = all(v <= max(tol, 2 * (today or {}).get(k, 0.0)) for k, v in list(out.items()))
    return out


def graph_replays(name: str, c: dict, p: float) -> dict:
    """The forward and backward with dropout captured in one CUDA graph and replayed twice."""
    try:
        q, k, v = (t.detach().clone().requires_grad_() for t in (c["q"], c["k"], c["v"]))

        def run():
            y = attend(name, c, p, q, k, v)
            return torch.autograd.grad(y, (q, k, v), c["grad"])

        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                run()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            grads = run()
        graph.replay()
        graph.replay()
        torch.cuda.synchronize()
        return {"ok": bool(all(torch.isfinite(t).all() for t in grads))}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}


def measure(name: str, c: dict, ref, p: float, cuda: bool, today: dict | None) -> dict:
    try:
        r = {"agreement": agreement(name, c, ref, today)}
    except Exception as e:  # the kernel refused these inputs: say what it said
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
    if cuda:
        try:  # with dropout, which a kernel may refuse where it took the comparison without
            forward_backward(name, c, p)  # a first call builds what the kernel caches
            r["ms_forward_backward"] = round(median_ms(lambda: forward_backward(name, c, p), 10), 4)
        except Exception as e:
            r["error"] = f"with dropout {p}: {type(e).__name__}: {e}"[:300]
        r["cuda_graph"] = graph_replays(name, c, p)
    r["ok"] = r["agreement"]["ok"] and "error" not in r and r.get("cuda_graph", {"ok": True})["ok"]
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the report here")
    p.add_argument("--config", default="base", help="the preset whose width, heads, latents and dropout to use")
    p.add_argument("--shapes", default=None, help=f"batch shapes B,TT,TM separated by ';' (default {H100_SHAPES} "
                   f"on CUDA, {CPU_SHAPES} on a CPU)")
    p.add_argument("--timeout-s", type=float, default=25.0, help="stop after this long, with what has run")
    a = p.parse_args(argv)
    cuda = torch.cuda.is_available()
    try:
        given = a.shapes or (H100_SHAPES if cuda else CPU_SHAPES)
        shapes = [tuple(int(x) for x in s.split(",")) for s in given.split(";")]
        assert all(len(s) == 3 and min(s) > 0 for s in shapes)
    except (ValueError, AssertionError):
        p.error(f"--shapes takes positive B,TT,TM triples separated by ';', got {a.shapes!r}")
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    names = ["efficient", "cudnn", "flash_folded"] if cuda else ["default", "flash_folded"]
    report: dict = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if cuda else "cpu",
                    "dtype": str(dtype).removeprefix("torch."), "candidates": names, "results": []}
    if not cuda:
        report["not_run"] = "efficient, cudnn, timings and CUDA graphs need a CUDA GPU"

    def finish(status: str) -> int:
        signal.alarm(0)
        report["status"] = status
        ran = [r for res in report["results"] for r in res.get("candidates", {}).values()]
        today = [res.get("candidates", {}).get(names[0], {}) for res in report["results"]]
        report["ok"] = (status == "done" and bool(today) and all("agreement" in t for t in today)
                        and all(r["agreement"]["ok"] for r in ran if "agreement" in r))
        report["fastest"] = fastest(report["results"])
        text = json.dumps(report, indent=1)
        if a.json:
            Path(a.json).write_text(text + "\n")
        print(text)
        return 0 if report["ok"] else 1

    def stop(signum, frame):
        raise OutOfTime

    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGALRM, signal.SIGTERM)}
    signal.alarm(max(1, int(a.timeout_s)))
    t0 = time.perf_counter()
    try:
        m = load(a.config, []).model
        h, dh, pdrop = m.n_heads, m.d_model // m.n_heads, m.dropout
        report.update(config=a.config, heads=h, head_dim=dh, dropout=pdrop)
        for i, (b, tt, tm) in enumerate(shapes):
            frames, text = lengths(b, tm, i), lengths(b, tt, 100 + i)
            # frames over frames (key padding both ways), and frames over [text ; latents]
            for kind, tk, k_lens in (("frames", tm, frames), ("memory", tt + m.n_latents, text + m.n_latents)):
                res = {"shape": [b, tt, tm], "attention": kind, "q": [b, h, tm, dh], "k": [b, h, tk, dh],
                       "padded_keys": int((tk - k_lens).sum())}
                report["results"].append(res)
                try:
                    c = case(b, h, dh, tm, tk, frames, k_lens, dtype, device, seed=i)
                    ref = forward_backward("math", c, 0.0, torch.float32)
                except Exception as e:  # the reference itself (memory): the next shape may fit
                    res["error"] = f"reference: {type(e).__name__}: {e}"[:300]
                    continue
                res["candidates"] = {}
                for n in names:  # today's kernel first: the others are held to its errors
                    today = res["candidates"].get("efficient", {}).get("agreement")
                    res["candidates"][n] = measure(n, c, ref, pdrop, cuda, today)
                del c, ref
        report["seconds"] = round(time.perf_counter() - t0, 1)
        return finish("done")
    except OutOfTime:
        report["error"] = f"stopped after {time.perf_counter() - t0:.0f} s (its --timeout-s or SIGTERM)"
        return finish("timed out")
    except Exception as e:
        report["error"] = f"{type(e).__name__}: {e}"[:2000]
        return finish("failed")
    finally:
        signal.alarm(0)
        for sig, handler in before.items():
            signal.signal(sig, handler)


def fastest(results: list) -> dict:
    """Per attention kind: the summed time of each candidate that agreed and replayed in a graph
    over every shape measured, and its speed-up over the efficient kernel's (today's)."""
    out = {}
    for kind in sorted({r["attention"] for r in results}):
        rows = [r for r in results if r["attention"] == kind and "candidates" in r]
        if not rows:
            continue
        total = {}
        for n in rows[0]["candidates"]:
            got = [r["candidates"][n] for r in rows]
            if all(g["ok"] and "ms_forward_backward" in g for g in got):
                total[n] = round(sum(g["ms_forward_backward"] for g in got), 4)
        if total:
            best = min(total, key=total.get)
            base = total.get("efficient")
            out[kind] = {"ms_summed_over_shapes": total, "fastest": best,
                         "speedup_over_efficient": round(base / total[best], 3) if base else None}
    return out


if __name__ == "__main__":
    sys.exit(main())
