"""Model FLOPs of a training step and MFU (docs/design.md, "MFU"), shared by ``myxtts profile`` and
``myxtts bench``, and the step time an H100 would need for them (``bench loader``'s simulated GPU).

FLOPs are counted, not estimated: ``torch.utils.flop_counter.FlopCounterMode`` runs the eager
model once on a real batch, forward + loss + backward, and sums the FLOPs of every matmul,
convolution and attention by their actual shapes (padding included: padded frames cost the GPU
as much as real ones). A compiled step runs the same maths, so its FLOPs are the eager count.

MFU = achieved model FLOP/s ÷ the device's *dense bf16* peak, whatever the training precision,
so MFU figures compare across runs and with published ones. The peak comes from a table of
datasheet values; a device not in it reports "unknown peak" rather than a guessed number.

    flops = count_step_flops(core, batch, precision)     # one micro-batch, forward + backward
    m = mfu(flops * grad_accum * steps, seconds, torch.cuda.get_device_name())
    m["mfu_pct"], m["achieved_tflops"], m["mfu_basis"]  # mfu_pct None when the peak is unknown
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch

from myxtts.data.dataset import ref_len_for
from myxtts.models.xtts import XTTS, count_parameters
from myxtts.speaker_encoder import DIM as SPEAKER_DIM

# (label, dense bf16 TFLOP/s, test on the lower-cased device name), first match wins. Names as
# torch.cuda.get_device_name reports them: "NVIDIA H100 80GB HBM3" (SXM), "NVIDIA H100 PCIe",
# "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB". The NVL parts have other
# peaks and are left out on purpose.
PEAKS = (
    ("H100 PCIe", 756.0, lambda n: "h100" in n and "pcie" in n),
    ("H100 SXM", 989.0, lambda n: "h100" in n and ("sxm" in n or "hbm3" in n) and "nvl" not in n),
    ("H200", 989.0, lambda n: "h200" in n and "nvl" not in n),
    ("A100", 312.0, lambda n: "a100" in n),
)


# (label, the highest SM clock in MHz, test on the lower-cased device name), first match wins:
# what a lowered clock is weighed against when a run did not record the highest it sampled.
# Data-centre cards: the maximum boost clock (nvidia-smi's "Max Clocks: SM"); consumer cards: the
# rated boost clock, which they exceed when cool, so a loss weighed against it errs low.
MAX_SM_CLOCKS = (
    ("H100 PCIe", 1755.0, lambda n: "h100" in n and "pcie" in n),
    ("H100 SXM", 1980.0, lambda n: "h100" in n and ("sxm" in n or "hbm3" in n) and "nvl" not in n),
    ("H200", 1980.0, lambda n: "h200" in n and "nvl" not in n),
    ("A100", 1410.0, lambda n: "a100" in n),
    ("L40S", 2520.0, lambda n: "l40s" in n),
    ("L4", 2040.0, lambda n: n.endswith(" l4") or n == "l4"),
    ("A10G", 1710.0, lambda n: "a10g" in n),
    ("RTX 4090", 2520.0, lambda n: "4090" in n),
    ("RTX 3090", 1695.0, lambda n: "3090" in n and "ti" not in n),
    ("V100", 1530.0, lambda n: "v100" in n and "pcie" not in n),
    ("V100 PCIe", 1380.0, lambda n: "v100" in n and "pcie" in n),
    ("T4", 1590.0, lambda n: n.endswith(" t4") or n == "t4"),
)


def _lookup(table, device_name: str | None):
    """(label, value) of the first entry of ``table`` that matches the device name, or None."""
    name = (device_name or "").lower()
    return next(((label, value) for label, value, match in table if match(name)), None)


def peak_tflops(device_name: str | None) -> tuple[float | None, str]:
    """(dense bf16 peak in TFLOP/s, its label) for a device name; (None, "unknown peak ...")
    for devices not in the table (and for the CPU)."""
    hit = _lookup(PEAKS, device_name)
    if hit:
        return hit[1], f"{hit[0]} dense bf16 {hit[1]:g} TFLOP/s"
    return None, f"unknown peak for {device_name or 'this device'}"


def max_sm_clock(device_name: str | None) -> tuple[float, str] | None:
    """(the card's highest SM clock in MHz, its label) for a device name, or None if not in the table."""
    hit = _lookup(MAX_SM_CLOCKS, device_name)
    return (hit[1], hit[0]) if hit else None


def count_step_flops(core: torch.nn.Module, batch: dict, precision=None) -> int:
    """FLOPs of one eager forward + loss + backward of ``core`` on ``batch``.

    ``core`` is the bare model (not DDP/compiled), with ``forward(batch)`` and
    ``losses(batch, out)``; ``precision`` (train.precision.Precision) sets the autocast the
    step uses. Gradients are cleared afterwards, so call it between optimizer steps; the RNG
    is forked, so counting does not shift the run's random stream."""
    from torch.utils.flop_counter import FlopCounterMode

    dev = next(core.parameters()).device
    devices = [dev] if dev.type == "cuda" else []
    autocast = precision.autocast() if precision is not None else contextlib.nullcontext()
    # Regionally compiled blocks (train.compile=regional) live inside the bare model: run them
    # eagerly here, so the counter sees every op (set_stance is torch >= 2.6).
    stance = torch.compiler.set_stance("force_eager") if hasattr(torch.compiler, "set_stance") \
        else contextlib.nullcontext()
    with torch.random.fork_rng(devices=devices), FlopCounterMode(display=False) as counter, stance:
        with autocast:
            out = core(batch)
        core.losses(batch, {k: v.float() for k, v in out.items()})["loss"].backward()
    core.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def mfu(flops: float, seconds: float, device_name: str | None) -> dict:
    """Achieved TFLOP/s of ``flops`` done in ``seconds`` and MFU against the device's peak.

    Returns achieved_tflops, peak_tflops (None if unknown), mfu_pct (None if unknown),
    mfu_basis (the peak's label, or why there is none)."""
    achieved = flops / seconds / 1e12 if seconds > 0 else None
    peak, basis = peak_tflops(device_name)
    pct = 100.0 * achieved / peak if achieved is not None and peak else None
    return {"achieved_tflops": achieved, "peak_tflops": peak, "mfu_pct": pct, "mfu_basis": basis}


def meta_step_flops(cfg, cache, shapes, quick: bool = False) -> tuple[dict, str, int]:
    """({(B, Tt, Tm): FLOPs} of one forward + loss + backward of ``cfg.model`` on each batch
    shape, how they were counted, the model's parameters). Counted on meta tensors: no memory,
    no time, the same matmul and attention shapes as a real batch (padding costs as much as real
    frames). ``quick`` counts three shapes and fits FLOPs per row = a + b*Tm + c*Tm^2 (linear
    layers and attention) for the rest. Without a ``cache`` (a run folder's config alone) the
    config's audio settings are the cache's, and one symbol stands for the vocabulary: it sizes
    only the text embedding, a lookup without FLOPs."""
    audio = cache.audio_cfg if cache is not None else cfg.audio
    n_mels, n_vocab = audio.n_mels, len(cache.vocab) if cache is not None else 1
    tr = ref_len_for(audio, cfg.data.ref_seconds, cfg.data.pad_multiple)
    with torch.device("meta"):
        model = XTTS(cfg.model, n_vocab, n_mels).train()

    def flops(B, Tt, Tm) -> float:
        with torch.device("meta"):
            batch = {"tokens": torch.zeros(B, Tt, dtype=torch.long), "token_lens": torch.full((B,), Tt),
                     "mel": torch.zeros(B, Tm, n_mels), "mel_lens": torch.full((B,), Tm),
                     "ref_mel": torch.zeros(B, tr, n_mels), "ref_lens": torch.full((B,), tr),
                     "speaker": torch.zeros(B, dtype=torch.long), "index": torch.zeros(B, dtype=torch.long),
                     "ref_emb": torch.zeros(B, SPEAKER_DIM)}  # read only by a model conditioned on it
        return float(count_step_flops(model, batch))

    by_tm = sorted(shapes, key=lambda s: s[2])
    if quick and len(by_tm) > 3:
        picks = [by_tm[0], by_tm[len(by_tm) // 2], by_tm[-1]]
        coef = np.linalg.solve(np.array([[1.0, s[2], s[2] ** 2] for s in picks]), [flops(*s) / s[0] for s in picks])
        return ({s: s[0] * float(coef @ [1.0, s[2], s[2] ** 2]) for s in shapes},
                "counted for 3 shapes, FLOPs/row fitted as a + b*Tm + c*Tm^2 for the rest (--quick)",
                count_parameters(model))
    return {s: flops(*s) for s in shapes}, "counted for every shape", count_parameters(model)


NOT_APPLICABLE_ON_CPU = "not applicable on a CPU: MFU is against a GPU's dense bf16 peak"


def run_mfu(flops_by_shape: dict[str, float], step_by_shape: dict, device: str, device_name: str | None) -> dict:
    """A training run's MFU: for each batch shape ("BxTtxTm", as the step timer names them) its
    FLOPs over its mean step time, and over the run the FLOPs of every timed step over their
    time. → mfu_pct (None where the peak is unknown or on a CPU), achieved_tflops, mfu_basis,
    mfu_by_shape {shape: {tflop, achieved_tflops, mfu_pct, steps}}."""
    by, flops, seconds = {}, 0.0, 0.0
    cpu = not str(device).startswith("cuda")
    for key, st in step_by_shape.items():
        f, n, ms = flops_by_shape.get(key), st.get("n") or 0, st.get("mean_ms")
        if f is None or not n or not ms:
            continue
        m = mfu(f, ms / 1e3, None if cpu else device_name)
        by[key] = {"tflop": f / 1e12, "achieved_tflops": m["achieved_tflops"],
                   "mfu_pct": m["mfu_pct"], "steps": n}
        flops, seconds = flops + f * n, seconds + ms / 1e3 * n
    m = mfu(flops, seconds, None if cpu else device_name)
    basis = NOT_APPLICABLE_ON_CPU if cpu else m["mfu_basis"]
    if not by:
        basis = "no step was timed after warm-up"
    return {"mfu_pct": m["mfu_pct"] if by else None, "achieved_tflops": m["achieved_tflops"] if by else None,
            "mfu_basis": basis, "mfu_by_shape": by}


def summary_mfu(summary: dict, count) -> dict:
    """``run_mfu`` of a run's summary, with ``count([(B, Tt, Tm), ...]) -> {shape: FLOPs}``
    counting the FLOPs of the shapes it timed. Summaries whose shapes do not name B x Tt x Tm
    (before the text length was in them) get none, and say why."""
    timed = summary.get("step_by_shape") or {}
    shapes = {key: tuple(int(x) for x in key.split("x")) for key in timed
              if len(key.split("x")) == 3 and key.replace("x", "").isdigit()}
    if timed and len(shapes) < len(timed):
        return {"mfu_pct": None, "achieved_tflops": None, "mfu_by_shape": {},
                "mfu_basis": "the summary's batch shapes lack the text length (B x Tt x Tm): FLOPs not counted"}
    counted = count(list(shapes.values())) if shapes else {}
    flops = {key: counted[shape] for key, shape in shapes.items()}
    return run_mfu(flops, timed, summary.get("device", ""), summary.get("device_name"))


SIMULATED_MFU = 0.40
SIMULATED_GPU = "NVIDIA H100 80GB HBM3"  # an H100 SXM, as torch names it


def simulated_step_ms(cfg, cache, shapes, quick: bool = False) -> tuple[dict, dict]:
    """{(B, Tt, Tm): ms} an H100 would need for one training step of ``cfg.model`` on each batch
    shape, at an assumed ``SIMULATED_MFU`` of its dense bf16 peak, and how that was derived:
    ms = FLOPs(forward + loss + backward) / (MFU * peak) * 1e3, FLOPs counted on meta tensors.
    ``quick`` counts three shapes and fits FLOPs per row = a + b*Tm + c*Tm^2 (linear layers and
    attention) for the rest."""
    counted, how, n_params = meta_step_flops(cfg, cache, shapes, quick)
    peak, basis = peak_tflops(SIMULATED_GPU)
    ms = {s: f / (SIMULATED_MFU * peak * 1e12) * 1e3 for s, f in counted.items()}
    info = {"source": "derived", "model_params": n_params,
            "formula": "step_ms = FLOPs(forward + loss + backward) / (MFU * peak) * 1e3",
            "flops": "torch.utils.flop_counter.FlopCounterMode on meta tensors of each (B, Tt, Tm); " + how,
            "mfu_assumed": SIMULATED_MFU, "peak_tflops": peak, "peak_basis": basis,
            "per_shape_ms": {str(s): round(v, 3) for s, v in ms.items()},
            "per_shape_tflop": {str(s): round(f / 1e12, 3) for s, f in counted.items()}}
    return ms, info
