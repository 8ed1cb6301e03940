"""The figures a diagnosis reads, typed: ``Settings`` (what the run was asked to do) and
``Measured`` (what was measured, plus its settings).

Every field is optional, because each command measures a different subset (``myxtts profile``
has kernel statistics, the trainer has NVML samples over the whole run, ``myxtts doctor`` has a
few eager steps), and a rule whose inputs are missing stays silent. A misspelt field, though, is
a ``TypeError`` where the object is built, not a rule that silently never fires.

The figures derived from them that several rules and reports read live here, once.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from myxtts.observe.gpu_summary import GpuStats, GpuSummary
from myxtts.observe.stats import IDLE_MEAN_PCT, SeriesStats
from myxtts.train.memory import DeviceMemory

# The profiler's kernel-busy share and NVML's utilisation measure the same thing in two ways;
# further apart than this, one of them counts something it should not (see GpuBusy).
BUSY_DISAGREE_PTS = 25.0


@dataclass(frozen=True)
class Settings:
    device: str = ""                # "cuda:0", "cpu"
    device_name: str = ""
    bf16_supported: bool | None = None
    cpu_count: int | None = None
    num_workers: int | None = None
    prefetch_factor: int | None = None
    pin_memory: bool | None = None
    on_the_fly: bool | None = None
    frame_budget: int | None = None  # the budget the run trained with (what an automatic one resolved to)
    pad_multiple: int | None = None
    max_buckets: int | None = None
    compile: str | None = None      # the mode the run resolved to: off, default, cudagraphs, ...
    precision: str | None = None
    grad_accum: int | None = None
    log_every: int | None = None
    world_size: int = 1

    @classmethod
    def from_config(cls, cfg, *, device: str = "", device_name: str = "", bf16_supported=None,
                    cpu_count: int | None = None, compile: str | None = None, world_size: int = 1) -> Settings:
        """The settings of a ``myxtts.config.Config``; ``compile`` is the resolved mode when known."""
        d, t = cfg.data, cfg.train
        return cls(device=device, device_name=device_name, bf16_supported=bf16_supported,
                   cpu_count=cpu_count or os.cpu_count() or 1, num_workers=d.num_workers,
                   prefetch_factor=d.prefetch_factor, pin_memory=d.pin_memory, on_the_fly=d.on_the_fly,
                   frame_budget=d.fixed_budget, pad_multiple=d.pad_multiple, max_buckets=d.max_buckets,
                   compile=compile or t.compile, precision=t.precision, grad_accum=t.grad_accum,
                   log_every=t.log_every, world_size=world_size)

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")


@dataclass(frozen=True)
class GpuBusy:
    """The GPU busy share the verdict uses, where it came from, and a sentence when two
    measurements of it disagree."""
    pct: float
    basis: str
    note: str = ""


@dataclass
class Measured:
    settings: Settings = field(default_factory=Settings)
    # step timing (StepTimer.summary()); step_pct is the CUDA-event time from the start to the
    # end of each step over wall time: host launching and GPU work together, not GPU busy time
    steps: int | None = None
    step_ms: float | None = None
    step_cov_pct: float | None = None
    input_bound_pct: float | None = None   # data wait, plus the exposed copy where a profile measured it
    h2d_pct: float | None = None           # the exposed host-to-device copy (profile only)
    step_pct: float | None = None
    other_pct: float | None = None
    step_by_shape: dict = field(default_factory=dict)
    throughput: dict = field(default_factory=dict)  # frames_per_s, audio_s_per_s, samples_per_s
    gpu: GpuSummary | None = None          # NVML (and GPM) sampled beside the steps
    # profiler
    gpu_busy_pct: float | None = None      # union of kernel intervals / step time
    kernels_per_step: float | None = None
    median_kernel_us: float | None = None
    cpu_dispatch_pct: float | None = None  # host time inside the step call / step time
    # the run
    recompiles: int | None = None
    n_shapes: int | None = None
    host_syncs_per_step: float | None = None
    padding_pct: float | None = None
    mfu_pct: float | None = None
    mfu_by_shape: dict = field(default_factory=dict)  # {"BxTtxTm": {tflop, achieved_tflops, mfu_pct, steps}}
    mem_peak_pct: float | None = None      # peak memory, % of capacity (train.memory: allocator reserved)
    memory: DeviceMemory | None = None     # the allocator's figures behind it, retries and OOMs
    compile_s: float | None = None         # warm-up spent compiling, before the first timed step
    graphs_compiled: int | None = None     # graphs the step compiled before step 1 (1: one for every shape)
    cudagraph_skips: int | None = None     # CUDA graphs torch skipped (those steps ran without one)
    cudagraph_recordings: int | None = None
    train_s: float | None = None           # wall time after the compile (the timer's warm-up steps included)
    ranks: list = field(default_factory=list)  # under DDP: each rank's figures (train.collectives.FIGURES)
    not_measured: dict = field(default_factory=dict)  # {section: reason}

    # ------------------------------------------------------------------------------ builders
    @classmethod
    def from_summary(cls, s: dict, settings: Settings) -> Measured:
        """A training run's ``summary.json`` (``train.loop.fit`` plus the log's GPU summary).

        A summary without ``compile_s`` whose every step was the first of its batch shape (no
        step was timed after warm-up) spent its time compiling: the whole run is counted so."""
        compile_s, train_s = s.get("compile_s"), s.get("wall_seconds")
        memory = DeviceMemory.from_dict(s.get("memory"))
        # Summaries written before the allocator's figures were recorded have only NVML's.
        gpu = GpuSummary.from_dict(s.get("gpu"))
        mem_pct = memory.reserved_peak_pct if memory else nvml_memory_pct(gpu)
        nm = {}
        if (compile_s is None and settings.compile not in (None, "off") and s.get("step_ms") is None
                and s.get("steps") is not None and s["steps"] <= (s.get("shapes_seen") or 0)):
            compile_s, train_s = train_s, 0.0
            nm["compile"] = "every step was the first of its shape: the whole run was warm-up"
        return cls(settings=settings, steps=s.get("steps"), step_ms=s.get("step_ms"),
                   step_cov_pct=s.get("step_cov_pct"), input_bound_pct=s.get("input_bound_pct"),
                   h2d_pct=s.get("h2d_pct"),
                   step_pct=s.get("compute_pct"), other_pct=s.get("other_pct"),
                   step_by_shape=s.get("step_by_shape") or {}, throughput=s.get("throughput") or {},
                   gpu=gpu,
                   recompiles=s.get("recompiles_after_warmup"), n_shapes=s.get("shapes_seen"),
                   padding_pct=s.get("padding_pct"), mem_peak_pct=mem_pct, memory=memory,
                   mfu_pct=s.get("mfu_pct"), mfu_by_shape=s.get("mfu_by_shape") or {},
                   compile_s=compile_s, train_s=train_s, graphs_compiled=s.get("graphs_compiled"),
                   cudagraph_skips=s.get("cudagraph_skips"), cudagraph_recordings=s.get("cudagraph_recordings"),
                   ranks=s.get("ranks") or [], not_measured=nm)

    # ------------------------------------------------------------------------ derived figures
    def _series(self, key: str) -> list[SeriesStats]:
        return [getattr(g, key) for g in (self.gpu.gpus if self.gpu else []) if getattr(g, key)]

    def _least_busy(self, key: str) -> SeriesStats | None:
        """Among GPUs that work, the least busy (it sets the pace under DDP); GPUs idle beside
        busy ones are a finding of their own (``idle_gpus``), not the run's utilisation."""
        series = self._series(key)
        working = [u for u in series if u.mean >= IDLE_MEAN_PCT] or series
        return min(working, key=lambda u: u.mean, default=None)

    def util(self) -> SeriesStats | None:
        """NVML utilization.gpu statistics of the run."""
        return self._least_busy("util")

    def sm(self) -> SeriesStats | None:
        """GPM SM-activity statistics of the run."""
        return self._least_busy("sm_active")

    def tensor_active(self) -> float | None:
        """GPM's tensor-core activity, mean % over the run (the least busy GPU's), where GPM ran."""
        vals = [g.tensor_active_mean for g in (self.gpu.gpus if self.gpu else []) if g.tensor_active_mean is not None]
        return min(vals, default=None)

    def idle_gpus(self) -> tuple[list[GpuStats], list[GpuStats]]:
        """(idle, busy) GPUs when some sampled GPUs idle while others work."""
        gpus = [g for g in (self.gpu.gpus if self.gpu else []) if g.util]
        idle = [g for g in gpus if g.util.mean < IDLE_MEAN_PCT]
        busy = [g for g in gpus if g.util.mean >= IDLE_MEAN_PCT]
        return (idle, busy) if idle and busy else ([], [])

    def busy(self) -> GpuBusy | None:
        """The GPU busy share: the profiler's kernel time per step where there is one, NVML's
        utilisation mean otherwise. Where both exist and differ by more than BUSY_DISAGREE_PTS,
        NVML wins: the driver samples it independently of what a profiler counts as a kernel
        (an annotation range or a copy mistaken for one inflates the profile, never NVML)."""
        u, prof = self.util(), self.gpu_busy_pct
        if prof is None:
            return GpuBusy(u.mean, "NVML utilization.gpu mean") if u else None
        if u is None or abs(prof - u.mean) <= BUSY_DISAGREE_PTS:
            return GpuBusy(prof, "profiled kernel time / step time")
        sm = self.sm()
        gpm = f", GPM SM active {sm.mean:.0f} %" if sm else ""
        return GpuBusy(u.mean, "NVML utilization.gpu mean",
                       f"the profile's kernel time says {prof:.0f} % busy and NVML says {u.mean:.0f} %"
                       f"{gpm}; they differ by more than {BUSY_DISAGREE_PTS:g} points, so the verdict uses "
                       "NVML, which the driver samples on its own while the profile depends on what it "
                       "counts as a kernel")

    @property
    def data_wait_pct(self) -> float | None:
        """The part of input-bound % the loop spent blocked on the batch stream: all of it, less
        the exposed copy where a profile measured one."""
        ib = self.input_bound_pct
        return None if ib is None else max(0.0, ib - (self.h2d_pct or 0.0))

    @property
    def step_label(self) -> str:
        """What the step share measures: on a GPU the host's launching and the GPU's work
        together, which is not how busy the GPU was."""
        return "step (host + GPU)" if self.settings.on_gpu else "step (CPU)"

    def only_compiled(self) -> bool:
        """The run spent its time compiling: warm-up happened and no step was timed after it."""
        return bool(self.compile_s) and self.step_ms is None


def nvml_memory_pct(gpu: GpuSummary | None) -> float | None:
    """NVML's peak memory used on the busiest-memory GPU, % of its total, from a GpuSampler
    summary: the peak memory of summaries that predate the allocator's figures."""
    pcts = [100.0 * g.mem_used_max_mib / g.mem_total_mib for g in (gpu.gpus if gpu else [])
            if g.mem_used_max_mib is not None and g.mem_total_mib]
    return max(pcts, default=None)
