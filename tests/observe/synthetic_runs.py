"""Synthetic runs with known answers: a util trace plus the figures StepTimer/profile would give.

Each builder returns (Measured, expected util verdict, expected bound, expected top rule, a
substring the top action must contain).
"""
from __future__ import annotations

import numpy as np

from myxtts.observe.gpu_summary import GpuSample, summarize_samples
from myxtts.observe.measured import Measured, Settings

SETTINGS = Settings(device="cuda:0", device_name="NVIDIA H100 80GB HBM3", bf16_supported=True, cpu_count=16,
                    num_workers=2, prefetch_factor=4, pin_memory=True, on_the_fly=False, frame_budget=12000,
                    pad_multiple=64, max_buckets=8, compile="default", precision="bf16", grad_accum=1,
                    log_every=50)


def gpu_summary(util, sm_active=None, throttle=None) -> dict:
    """The sampler's summary of one GPU sampled every 0.5 s: ``util`` (clipped to 0-100 %), and
    per sample the GPM SM activity and the clock-event reasons where given."""
    util = np.clip(util, 0, 100)
    sm_active = [None] * len(util) if sm_active is None else sm_active
    throttle = [()] * len(util) if throttle is None else throttle
    return summarize_samples([GpuSample(t=i * 0.5, gpu=0, util=float(u), sm_active=sm, throttle=r)
                              for i, (u, sm, r) in enumerate(zip(util, sm_active, throttle))], 0.5)


def _shapes(cov_pct=3.0, mean=120.0):
    return {"16x768": {"n": 200, "mean_ms": mean, "cov_pct": cov_pct, "p50_ms": mean, "p95_ms": mean * 1.05,
                       "first_ms": 41000.0},
            "32x384": {"n": 180, "mean_ms": mean * 0.9, "cov_pct": cov_pct, "p50_ms": mean * 0.9,
                       "p95_ms": mean * 0.95, "first_ms": 38000.0}}


def compute_bound():
    """97 % busy, kernels of a quarter millisecond, the loader idle: the GPU itself is the limit."""
    rng = np.random.default_rng(0)
    m = Measured(settings=SETTINGS, gpu=gpu_summary(97 + rng.normal(0, 1.5, 240)), input_bound_pct=0.4,
                 h2d_pct=0.1, step_pct=98.5, other_pct=1.1, gpu_busy_pct=96.0,
                 kernels_per_step=420, median_kernel_us=250.0, cpu_dispatch_pct=35.0, recompiles=0,
                 padding_pct=6.0, mfu_pct=45.0, mem_peak_pct=40.0, step_by_shape=_shapes(), step_ms=115.0,
                 step_cov_pct=5.0, steps=380)
    return m, "steady", "compute-bound", "compute", "data.frame_budget=25472"


def oscillating():
    """2-40 % swings: shapes not fixed, the step recompiles again and again."""
    rng = np.random.default_rng(1)
    m = Measured(settings=SETTINGS, gpu=gpu_summary(rng.uniform(2, 40, 240)), input_bound_pct=3.0,
                 h2d_pct=0.0, recompiles=40, n_shapes=57, padding_pct=4.0,
                 step_by_shape=_shapes(cov_pct=60.0), steps=300)
    return m, "oscillating", "launch-bound", "recompiles", "data.max_buckets=4"


def input_bound():
    rng = np.random.default_rng(2)
    m = Measured(settings=SETTINGS, gpu=gpu_summary(30 + rng.normal(0, 3, 240)), input_bound_pct=55.0,
                 h2d_pct=1.0, step_pct=44.0, recompiles=0, padding_pct=5.0,
                 step_by_shape=_shapes(), steps=300)
    return m, "starved", "input-bound", "input-workers", "data.num_workers=6"


def launch_bound():
    rng = np.random.default_rng(3)
    m = Measured(settings=SETTINGS, gpu=gpu_summary(42 + rng.normal(0, 3, 240)), input_bound_pct=0.8,
                 h2d_pct=0.0, gpu_busy_pct=38.0, kernels_per_step=3500, median_kernel_us=7.0,
                 cpu_dispatch_pct=85.0, recompiles=0, padding_pct=5.0, step_by_shape=_shapes(), steps=300)
    return m, "starved", "launch-bound", "launch", "train.compile=cudagraphs"


def idle():
    rng = np.random.default_rng(4)
    return Measured(settings=SETTINGS, gpu=gpu_summary(rng.uniform(0, 2, 240))), "idle", "idle", "idle", "myxtts doctor"


def data_gpu_idle_model_gpu_busy():
    """Two GPUs, one process: GPU 0 only feeds data (idle), GPU 1 trains at 96 %."""
    rng = np.random.default_rng(5)
    samples = [GpuSample(t=i * 0.5, gpu=g, util=float(u), mem_used_mib=30000.0, mem_total_mib=81559.0)
               for i in range(240) for g, u in ((0, rng.uniform(0, 2)), (1, 96 + rng.normal(0, 1.5)))]
    m = Measured(settings=SETTINGS, gpu=summarize_samples(samples, 0.5), input_bound_pct=0.5,
                 h2d_pct=0.0, recompiles=0, padding_pct=5.0, step_by_shape=_shapes(), steps=300)
    return m, "steady", "busy", "idle-gpus", "torchrun --nproc_per_node=2"


ALL = [compute_bound, oscillating, input_bound, launch_bound, idle, data_gpu_idle_model_gpu_busy]
