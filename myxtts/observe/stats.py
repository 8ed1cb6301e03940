"""Summaries of a utilisation series (NVML ``utilization.gpu``, GPM SM activity) and a verdict.

A mean alone hides a costly failure: a GPU swinging between 2 % and 40 % has the same mean as one
sitting at 21 %, and the two have different causes. So every series is summarised by its level
(mean, p5, median), its spread (standard deviation and coefficient of variation, docs/design.md
"Oscillation"), and the share of time spent below 50 %, and reduced to one verdict whose
thresholds are printed next to it.

Verdicts, checked in this order (the first that matches wins):

* ``idle``        mean < 5 %: nothing meaningful runs on the GPU (a loader-only process, a hang,
                  training on the wrong device). Checked first because noise on a near-zero
                  series has a huge CoV and would otherwise read as "oscillating".
* ``oscillating`` CoV > 25 % and standard deviation >= 8 points: the GPU alternates between
                  working and waiting. 25 % is where uniform swings between 2 % and 40 % sit
                  far above (CoV ~ 52 %) while a healthy run at 95 +- 3 % sits far below
                  (~ 3 %). The absolute floor of 8 points stops a flat 10 +- 3 % series (CoV 30 %)
                  from being called oscillating: it is starved, not swinging. Oscillation is
                  checked before starvation because it is the more specific signature: something
                  intermittent (loader bursts, recompiles, host syncs, eval pauses) stalls a GPU
                  that can run faster, and that points at different fixes than a flat low line.
* ``starved``     mean < 50 % or more than half of the time below 50 %: the GPU waits most of the
                  time at a steady rate (per-step overhead: input pipeline, kernel launches).
* ``steady``      otherwise.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

IDLE_MEAN_PCT = 5.0            # mean below this: idle
OSCILLATING_COV_PCT = 25.0     # coefficient of variation above this (with the floor below): oscillating
OSCILLATING_MIN_STD = 8.0      # ... and the swing must be at least this many percentage points (1 sd)
LOW_UTIL_PCT = 50.0            # a sample below this counts as "low"
STARVED_MEAN_PCT = 50.0        # mean below this: starved
STARVED_LOW_SHARE_PCT = 50.0   # or more than this share of samples low: starved


def thresholds_text() -> str:
    """The rules behind every verdict, printed wherever a verdict is shown."""
    return (f"idle: mean < {IDLE_MEAN_PCT:g} %; "
            f"oscillating: CoV > {OSCILLATING_COV_PCT:g} % and sd >= {OSCILLATING_MIN_STD:g} points; "
            f"starved: mean < {STARVED_MEAN_PCT:g} % or > {STARVED_LOW_SHARE_PCT:g} % of time "
            f"below {LOW_UTIL_PCT:g} %; steady: otherwise")


def series_text(u: SeriesStats) -> str:
    """A series' statistics in words, as monitor, report and diagnosis print them."""
    return (f"mean {u.mean:.1f} %, p5 {u.p5:.0f} %, median {u.median:.0f} %, CoV {u.cov_pct:.1f} %, "
            f"below {LOW_UTIL_PCT:g} % for {u.below50_pct:.0f} % of the time")


@dataclass
class SeriesStats:
    """Summary of a 0-100 % series. All values in percent (points), ``n`` in samples."""
    n: int
    mean: float
    p5: float
    median: float
    p95: float
    std: float
    cov_pct: float        # std / mean * 100; 0 when the mean is 0
    below50_pct: float    # share of samples below LOW_UTIL_PCT
    verdict: str


def _verdict(mean: float, std: float, cov: float, below50_pct: float) -> str:
    if mean < IDLE_MEAN_PCT:
        return "idle"
    if cov > OSCILLATING_COV_PCT and std >= OSCILLATING_MIN_STD:
        return "oscillating"
    if mean < STARVED_MEAN_PCT or below50_pct > STARVED_LOW_SHARE_PCT:
        return "starved"
    return "steady"


def summarize(values: Iterable[float | None]) -> SeriesStats | None:
    """Summarise a utilisation series in percent; ``None`` for an empty one (never invent data).

    NaN/None samples (a read that failed) are dropped rather than counted as 0 %.
    """
    a = np.array([v for v in values if v is not None], dtype=np.float64)
    a = a[~np.isnan(a)]
    if not a.size:
        return None
    mean, std = float(a.mean()), float(a.std())
    cov = std / mean * 100.0 if mean > 0 else 0.0
    below = float((a < LOW_UTIL_PCT).mean() * 100.0)
    p5, median, p95 = (float(x) for x in np.percentile(a, [5, 50, 95]))
    return SeriesStats(n=int(a.size), mean=mean, p5=p5, median=median, p95=p95, std=std, cov_pct=cov,
                       below50_pct=below, verdict=_verdict(mean, std, cov, below))
