"""Is a busy GPU productive? A GPU can be busy all the time and do little: the H100 of
2026-11-27 read 91-100 % NVML utilisation with tensor cores active a quarter of the time and MFU
about 25 %. This module holds what the diagnosis (``observe.diagnose``) says about a busy GPU:
compute-bound only where MFU or tensor activity is high, kernel-bound where it is measured low,
whether MFU is flat across the batch shapes (then no larger batch is suggested), and lowered
clocks weighed by the clock they cost, power and heat apart."""
from __future__ import annotations

from myxtts.observe.findings import Finding
from myxtts.observe.flops import max_sm_clock
from myxtts.observe.measured import Measured

THROTTLE_PCT = 10.0              # share of samples with a slowdown reason active
CLOCK_LOST_PCT = 3.0             # SM clock below its peak by less than this: normal under load, info only
COMPUTE_MFU_PCT = 40.0           # a busy GPU at this MFU or more is compute-bound; below it, kernel-bound
COMPUTE_TENSOR_PCT = 40.0        # ... or with its tensor cores active this share of the time (GPM)
FLAT_MFU_SPREAD = 0.15           # MFU within this share of its mean over every shape: batch size does not move it
SHAPE_MIN_STEPS = 5              # steps of one shape before its step time or MFU is judged


def busy_verdict(m: Measured, level: str) -> tuple[str, str]:
    """The verdict of a GPU busy (``level`` says how busy, and the data wait) without the launch
    signature: compute-bound, kernel-bound or busy (efficiency not measured)."""
    mfu, tensor = m.mfu_pct, m.tensor_active()
    work = "; ".join(x for x in (f"MFU {mfu:.0f} %" if mfu is not None else "",
                                 f"tensor cores active {tensor:.0f} % (GPM)" if tensor is not None else "") if x)
    if (mfu is not None and mfu >= COMPUTE_MFU_PCT) or (tensor is not None and tensor >= COMPUTE_TENSOR_PCT):
        return "compute-bound", f"{level}; {work}: the GPU itself is the limit"
    if mfu is None and tensor is None:
        return "busy", (f"{level}; MFU and tensor-core activity not measured, so whether its kernels do "
                        "useful work is not known")
    return "kernel-bound", (f"{level}, but {work} (< {COMPUTE_MFU_PCT:g} %): busy, not productive; its "
                            "kernels do little with the time")


def mfu_flat(m: Measured) -> tuple[float, float] | None:
    """(lowest, highest) MFU over the batch shapes timed SHAPE_MIN_STEPS times or more, when they
    lie within FLAT_MFU_SPREAD of their mean: larger batches would not raise it."""
    vals = [v["mfu_pct"] for v in m.mfu_by_shape.values()
            if v.get("mfu_pct") is not None and (v.get("steps") or 0) >= SHAPE_MIN_STEPS]
    if len(vals) < 2:
        return None
    lo, hi = min(vals), max(vals)
    return (lo, hi) if hi - lo <= FLAT_MFU_SPREAD * (sum(vals) / len(vals)) else None


def flat_text(m: Measured) -> str:
    flat = mfu_flat(m)
    return (f"MFU is flat across the batch shapes ({flat[0]:.0f}-{flat[1]:.0f} % over {len(m.mfu_by_shape)}): "
            "larger batches would not raise it" if flat else "")


def kernel_findings(m, bound, why):
    """The kernel-bound (or unmeasured busy) finding, with `myxtts profile` as the next step."""
    if bound not in ("kernel-bound", "busy"):
        return
    flat = flat_text(m)
    ev = why + (f"; {flat}" if flat else "")
    act = ("`myxtts profile` (the step's kernels by time: the memory-bound ones, norms, casts and "
           "elementwise work around the matmuls, are where a busy GPU's time goes)")
    if bound == "busy":
        yield Finding("info", "The GPU is busy; how productive is not measured", ev, act, "busy", 0.0)
        return
    eff = max(x for x in (m.mfu_pct, m.tensor_active()) if x is not None)
    yield Finding("medium", "Kernel-bound: busy, but little work done per second", ev, act, "kernel",
                  max(0.0, COMPUTE_MFU_PCT - eff) * 2)


POWER_REASONS = ("sw_power_cap", "hw_power_brake")
THERMAL_REASONS = ("sw_thermal", "hw_thermal", "hw_slowdown")


def _clock_max(g) -> tuple[float | None, str]:
    """The clock a lowered one is weighed against, and what it is: the highest sampled, else
    (a summary that did not record it) the card's maximum from its datasheet."""
    if g.sm_clock_max_mhz:
        return g.sm_clock_max_mhz, "at its highest"
    card = max_sm_clock(g.name)
    return (card[0], f"the {card[1]}'s maximum") if card else (None, "")


def throttle_findings(g):
    """Lowered clocks, power and heat apart, weighed by the clock they cost: 1 - mean SM clock
    while training / the highest (``_clock_max``). A card at its power limit under load lowers
    its clock a little, often: that is normal (info), not a fault to chase. With no maximum to
    weigh against, the share of samples alone says nothing of the cost: info too."""
    top_mhz, what = _clock_max(g)
    lost = 100.0 * (1.0 - g.sm_clock_mean_mhz / top_mhz) if g.sm_clock_mean_mhz and top_mhz else None
    for kind, reasons, fix in (
            ("power limit", POWER_REASONS, "check the power limit and supply (`nvidia-smi -q -d POWER`)"),
            ("heat", THERMAL_REASONS, "check cooling (`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`)")):
        slow = {r: p for r, p in g.throttle_pct.items() if r in reasons and p >= THROTTLE_PCT}
        if not slow:
            continue
        top = ", ".join(f"{r} {p:.0f} % of samples" for r, p in sorted(slow.items(), key=lambda x: -x[1]))
        if lost is None:
            yield Finding("info", f"GPU {g.index} reports its {kind}", f"{top}; the clock it cost is not known "
                          f"(no maximum SM clock recorded for {g.name or 'this GPU'})",
                          f"if the steps are slower than expected: {fix}", "throttle", 0.0)
            continue
        clocks = (f"{top}; mean SM clock {g.sm_clock_mean_mhz:,.0f} MHz while training, "
                  f"{top_mhz:,.0f} MHz {what} ({-lost:+.1f} %)")
        if lost < CLOCK_LOST_PCT:
            yield Finding("info", f"GPU {g.index} holds its {kind} (clock {-lost:+.1f} %)", clocks,
                          "nothing to change: a card under full load meets its limit", "throttle", lost)
        else:
            yield Finding("medium", f"GPU {g.index} clocks are lowered by its {kind} ({-lost:+.0f} %)", clocks,
                          f"not a MyXTTS setting: {fix}", "throttle", lost)
