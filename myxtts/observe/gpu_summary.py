"""What a GPU sample holds, and what a series of them sums to: ``GpuSample`` (one GPU, one tick
of ``observe.gpu.GpuSampler``), ``GpuStats`` (one GPU's statistics over a run), ``GpuSummary``
(every GPU, with the compile window counted apart), and the CSV ``myxtts monitor --out`` writes.

Kept apart from the sampler because everything that reads GPU figures (diagnosis, report, the
closing summary, ``monitor``, ``profile``) reads these, while only the sampler talks to NVML; and
so that samples read back from a CSV or a test are summarised by the same code. What each figure
means: docs/design.md, "GPU utilisation". ``GpuSummary.as_dict``/``from_dict`` are the JSON edge
(``summary.json``, a profile's ``--json``); inside the package the figures are typed.
"""
from __future__ import annotations

import csv
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from statistics import fmean

from myxtts.files import atomic_write
from myxtts.observe.format import fmt
from myxtts.observe.stats import SeriesStats, summarize

# Clock-event reason bits from nvml.h, kept here so decoding works (and is tested) without NVML.
THROTTLE_REASONS = {
    0x001: "gpu_idle", 0x002: "applications_clocks", 0x004: "sw_power_cap",
    0x008: "hw_slowdown", 0x010: "sync_boost", 0x020: "sw_thermal", 0x040: "hw_thermal",
    0x080: "hw_power_brake", 0x100: "display_clocks",
}
# Reasons that cost speed while training; idle/app-clocks/sync-boost are informational.
SLOWDOWN_REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")


def decode_throttle(mask: int) -> tuple[str, ...]:
    """Bitmask from nvmlDeviceGetCurrentClocksEventReasons -> reason names (unknown bits by value)."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    rest = mask & ~sum(THROTTLE_REASONS)
    if rest:
        names.append(f"0x{rest:x}")
    return tuple(names)


@dataclass
class GpuSample:
    t: float                          # seconds since the sampler started
    gpu: int                          # index in this sampler's device list (== torch cuda index)
    util: float | None                # NVML utilization.gpu, %
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    throttle: tuple[str, ...] = ()
    sm_active: float | None = None    # GPM, %
    sm_occupancy: float | None = None  # GPM, %
    tensor_active: float | None = None  # GPM, %

    def short(self) -> str:
        """Compact text for a progress line: ``gpu0 97% sm 81% 61.2/80.0GiB 690W``."""
        parts = [f"gpu{self.gpu} {fmt(self.util, '{:.0f}%')}"]
        if self.sm_active is not None:
            parts.append(f"sm {self.sm_active:.0f}%")
        if self.mem_used_mib is not None and self.mem_total_mib:
            parts.append(f"{self.mem_used_mib / 1024:.1f}/{self.mem_total_mib / 1024:.1f}GiB")
        if self.power_w is not None:
            parts.append(f"{self.power_w:.0f}W")
        slow = [r for r in self.throttle if r in SLOWDOWN_REASONS]
        if slow:
            parts.append("throttle:" + ",".join(slow))
        return " ".join(parts)


@dataclass
class GpuStats:
    """One GPU's statistics over the samples kept (NVML, and GPM where it works)."""
    index: int = 0
    name: str = ""
    samples: int = 0
    util: SeriesStats | None = None        # NVML utilization.gpu
    sm_active: SeriesStats | None = None   # GPM SM activity
    sm_occupancy_mean: float | None = None
    tensor_active_mean: float | None = None
    gpm_reason: str = ""                   # why there is no sm_active, "" when there is
    mem_used_max_mib: float | None = None  # NVML: the CUDA context and every process on the GPU
    mem_total_mib: float | None = None
    power_mean_w: float | None = None
    sm_clock_mean_mhz: float | None = None
    sm_clock_max_mhz: float | None = None  # the highest SM clock sampled, warm-up and compiling included
    throttle_pct: dict[str, float] = field(default_factory=dict)  # share of samples each reason was active

    @classmethod
    def from_dict(cls, d: dict) -> GpuStats:
        series = {k: SeriesStats(**d[k]) for k in ("util", "sm_active") if d.get(k)}
        return cls(**{**d, "util": None, "sm_active": None, **series})


@dataclass
class CompileWindow:
    """Samples taken while the step compiled: not idle time, and no part of the training's."""
    from_s: float
    to_s: float
    seconds: float
    samples: int
    util_mean: float | None


# A run shorter than this many steady samples per GPU keeps its edges in the statistics: there
# would be too little left to judge otherwise.
MIN_STEADY_SAMPLES = 10


@dataclass
class GpuSummary:
    interval_s: float
    duration_s: float
    gpus: list[GpuStats] = field(default_factory=list)
    compiling: CompileWindow | None = None
    edge_samples: int = 0  # outside the compile window and outside steady training: not judged

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> GpuSummary | None:
        if d is None:
            return None
        comp = d.get("compiling")
        return cls(interval_s=d.get("interval_s", 0.0), duration_s=d.get("duration_s", 0.0),
                   gpus=[GpuStats.from_dict(g) for g in d.get("gpus", [])],
                   compiling=CompileWindow(**comp) if comp else None, edge_samples=d.get("edge_samples", 0))


def summarize_samples(samples: list[GpuSample], interval: float, devices: dict | None = None,
                      compiling: tuple[float, float] | None = None,
                      steady: tuple[float, float] | None = None) -> GpuSummary:
    """Per-GPU statistics of ``samples`` (``devices``: {index: (name, why GPM is off)}). Samples
    taken inside ``compiling`` (start and end, seconds on the samples' clock) are counted apart,
    as compiling: a GPU waiting for the compiler is not an idle GPU, and is no part of the
    training's utilisation either. With ``steady`` (start and end of steady training on the same
    clock), the samples outside it are the run's edges: the first steps of each shape and their
    CUDA graph recordings, the closing checkpoint. They are counted (``edge_samples``) but not
    judged, unless too few samples would be left (``MIN_STEADY_SAMPLES``)."""
    devices = devices or {i: ("", "") for i in sorted({s.gpu for s in samples})}

    def inside(s):
        return compiling is not None and compiling[0] <= s.t <= compiling[1]
    rest = [s for s in samples if not inside(s)]
    kept = [s for s in rest if steady is None or steady[0] <= s.t <= steady[1]]
    if len(kept) < MIN_STEADY_SAMPLES * max(1, len(devices)):
        kept = rest
    gpus = [summarize_gpu([s for s in kept if s.gpu == i], index=i, name=name, gpm_reason=why,
                          clock_max=max((s.sm_clock_mhz for s in samples if s.gpu == i and s.sm_clock_mhz),
                                        default=None))
            for i, (name, why) in devices.items()]
    out = GpuSummary(interval, samples[-1].t - samples[0].t if samples else 0.0, gpus,
                     edge_samples=len(rest) - len(kept))
    if compiling is not None:
        util = [s.util for s in samples if inside(s) and s.util is not None]
        out.compiling = CompileWindow(compiling[0], compiling[1], compiling[1] - compiling[0],
                                      sum(map(inside, samples)), _mean(util))
    return out


def summarize_gpu(samples: list[GpuSample], *, index: int = 0, name: str = "", gpm_reason: str = "",
                  clock_max: float | None = None) -> GpuStats:
    """Statistics of one GPU's samples (also used on samples read back from a CSV); ``clock_max``
    the highest SM clock of all its samples, else of these."""
    def vals(attr):
        return [getattr(s, attr) for s in samples if getattr(s, attr) is not None]

    sm = summarize(vals("sm_active"))
    n = len(samples) or 1
    reasons = sorted({r for s in samples for r in s.throttle})
    return GpuStats(
        index=index, name=name, samples=len(samples), util=summarize(vals("util")), sm_active=sm,
        sm_occupancy_mean=_mean(vals("sm_occupancy")), tensor_active_mean=_mean(vals("tensor_active")),
        gpm_reason="" if sm else (gpm_reason or "no GPM samples yet"),
        mem_used_max_mib=max(vals("mem_used_mib"), default=None),
        mem_total_mib=max(vals("mem_total_mib"), default=None),
        power_mean_w=_mean(vals("power_w")), sm_clock_mean_mhz=_mean(vals("sm_clock_mhz")),
        sm_clock_max_mhz=clock_max or max(vals("sm_clock_mhz"), default=None),
        throttle_pct={r: 100.0 * sum(r in s.throttle for s in samples) / n for r in reasons})


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


# ------------------------------------------------------------------------------------- CSV
def write_csv(samples: list[GpuSample], path: str | Path) -> None:
    with atomic_write(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[f.name for f in fields(GpuSample)])
        w.writeheader()
        for s in samples:
            row = asdict(s)
            row["throttle"] = "|".join(s.throttle)
            w.writerow({k: "" if v is None else v for k, v in row.items()})


def read_csv(path: str | Path) -> list[GpuSample]:
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            kw = {k: (float(v) if v != "" else None) for k, v in row.items() if k not in ("gpu", "throttle")}
            out.append(GpuSample(gpu=int(row["gpu"]), throttle=tuple(filter(None, row["throttle"].split("|"))), **kw))
    return out
