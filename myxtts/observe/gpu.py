"""Background GPU sampling through NVML (``nvidia-ml-py``, imported as ``pynvml``).

Why a thread and not ``nvidia-smi``: watching ``watch -n 1 nvidia-smi`` gives single numbers
read by eye. A sampler in the training process (or in ``myxtts monitor``) keeps
every sample, so a run ends with a series whose mean, spread and verdict can be computed
(``gpu_summary.summarize_samples``) and plotted next to the step timings.

What is read per GPU and tick, and what each figure means: docs/design.md, "GPU utilisation"
(``utilization.gpu``; on Hopper and newer the GPM SM activity, occupancy and tensor-core activity
between two consecutive GPM samples; memory, power, SM clock and the clock-event reasons). Each
field fails soft to ``None`` where the GPU or driver does not support it, and is not asked again.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from myxtts.errors import UserError
from myxtts.observe.gpu_summary import GpuSample, GpuSummary, decode_throttle, summarize_samples

_GPM_METRICS = (("sm_active", "NVML_GPM_METRIC_SM_UTIL"),
                ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY"),
                ("tensor_active", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"))


class GpuUnavailable(UserError):
    """No NVIDIA GPU can be sampled; the message is one sentence saying why."""


def _import_nvml():
    try:
        import pynvml
    except ImportError:
        raise GpuUnavailable("nvidia-ml-py is not installed, so no GPU can be sampled "
                             "(install it with: pip install 'myxtts[gpu]').") from None
    return pynvml


def _visible_indices(count: int) -> list:
    """NVML indices (or UUIDs) that match torch's cuda:0..n-1 under CUDA_VISIBLE_DEVICES.

    NVML ignores CUDA_VISIBLE_DEVICES and enumerates in PCI order; on machines with one GPU model
    (the usual training box) CUDA's order agrees. UUID and MIG entries are passed through.
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return list(range(count))
    out = []
    for item in (s.strip() for s in env.split(",")):
        if not item:
            continue
        if item.lstrip("-").isdigit():
            if int(item) < 0:
                break  # CUDA stops enumerating at the first invalid index
            if int(item) < count:
                out.append(int(item))
        else:
            out.append(item)
    return out


@dataclass
class _Device:
    index: int
    handle: object
    name: str
    unsupported: set = field(default_factory=set)
    gpm: list | None = None      # [previous sample, spare sample] while GPM works
    gpm_reason: str = ""         # why GPM is off, for "not measured (reason)"
    gpm_t: float = 0.0           # monotonic time of the previous GPM sample


class GpuSampler:
    """Sample every visible NVIDIA GPU every ``interval`` seconds in a daemon thread.

    >>> with GpuSampler(0.5) as s:          # raises GpuUnavailable without a GPU / NVML
    ...     train()
    ...     print(s.latest()[0].short())
    >>> s.summary().gpus[0].util.verdict
    """

    def __init__(self, interval: float = 0.5, *, max_samples: int = 1_000_000, nvml=None):
        self.interval = max(float(interval), 0.1)  # GPM needs >= 100 ms between its samples
        self._max = max_samples
        self._nvml = nvml  # injectable for tests
        self._devices: list[_Device] = []
        self._samples: list[GpuSample] = []  # each tick appends one per device, in device order
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    # ----------------------------------------------------------------------------- lifecycle
    def start(self) -> GpuSampler:
        nv = self._nvml or _import_nvml()
        self._nvml = nv
        try:
            nv.nvmlInit()
        except Exception as e:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            raise GpuUnavailable(f"no NVIDIA GPU can be sampled: {_init_failure(e)}.") from None
        try:
            wanted = _visible_indices(nv.nvmlDeviceGetCount())
            for i, ident in enumerate(wanted):
                h = (nv.nvmlDeviceGetHandleByIndex(ident) if isinstance(ident, int)
                     else nv.nvmlDeviceGetHandleByUUID(ident))
                name = nv.nvmlDeviceGetName(h)
                self._devices.append(_Device(i, h, name.decode() if isinstance(name, bytes) else name))
        except Exception as e:
            self._shutdown_nvml()
            raise GpuUnavailable(f"no NVIDIA GPU can be sampled: NVML failed to list devices ({_reason(e)}).") from None
        if not self._devices:
            self._shutdown_nvml()
            raise GpuUnavailable("no NVIDIA GPU is visible to NVML (check CUDA_VISIBLE_DEVICES and the driver).")
        for d in self._devices:
            self._gpm_open(d)
        self._t0 = time.monotonic()
        self._stop.clear()
        self._tick()  # one sample now, so latest() is never empty after start()
        self._thread = threading.Thread(target=self._run, name="myxtts-gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5 * self.interval + 1)
        self._thread = None
        for d in self._devices:
            self._gpm_close(d)
        self._shutdown_nvml()

    def __enter__(self) -> GpuSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _shutdown_nvml(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass

    # ------------------------------------------------------------------------------ sampling
    def _run(self) -> None:
        # Event.wait instead of sleep: stop() returns within one interval, not after it.
        while not self._stop.wait(self.interval):
            self._tick()

    def _tick(self) -> None:
        t = time.monotonic() - self._t0
        new = [self._read(d, t) for d in self._devices]
        with self._lock:
            self._samples.extend(new)
            if len(self._samples) > self._max:  # drop the oldest half: amortised O(1)
                del self._samples[:len(self._samples) // 2]

    def _field(self, d: _Device, key: str, fn):
        if key in d.unsupported:
            return None
        try:
            return fn()
        except Exception:
            d.unsupported.add(key)  # NotSupported/NoPermission: do not ask again every tick
            return None

    def _read(self, d: _Device, t: float) -> GpuSample:
        nv, h = self._nvml, d.handle
        util = self._field(d, "util", lambda: float(nv.nvmlDeviceGetUtilizationRates(h).gpu))
        mem = self._field(d, "mem", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        power = self._field(d, "power", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0)
        clock = self._field(d, "clock", lambda: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)))
        mask = self._field(d, "throttle", lambda: _throttle_mask(nv, h))
        s = GpuSample(t=round(t, 3), gpu=d.index, util=util,
                      mem_used_mib=mem.used / 2**20 if mem else None,
                      mem_total_mib=mem.total / 2**20 if mem else None,
                      power_w=power, sm_clock_mhz=clock,
                      throttle=decode_throttle(mask) if mask is not None else ())
        # GPM metrics need two samples >= 100 ms apart; the first tick (right after start) skips.
        if d.gpm and time.monotonic() - d.gpm_t >= 0.1:
            self._gpm_read(d, s)
        return s

    def _gpm_open(self, d: _Device) -> None:
        nv = self._nvml
        try:
            if not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
                d.gpm_reason = "this nvidia-ml-py has no GPM API"
                return
            if not nv.nvmlGpmQueryDeviceSupport(d.handle).isSupportedDevice:
                d.gpm_reason = f"{d.name} has no GPM (Hopper or newer needed)"
                return
            d.gpm = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
            nv.nvmlGpmSampleGet(d.handle, d.gpm[0])
            d.gpm_t = time.monotonic()
        except Exception as e:
            d.gpm, d.gpm_reason = None, f"GPM unavailable ({_reason(e)})"

    def _gpm_read(self, d: _Device, s: GpuSample) -> None:
        """Metrics between the previous GPM sample and one taken now; the two buffers swap."""
        nv = self._nvml
        prev, cur = d.gpm
        try:
            nv.nvmlGpmSampleGet(d.handle, cur)
            req = nv.c_nvmlGpmMetricsGet_t()
            req.version = nv.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = len(_GPM_METRICS)
            req.sample1, req.sample2 = prev, cur
            for i, (_, const) in enumerate(_GPM_METRICS):
                req.metrics[i].metricId = getattr(nv, const)
            nv.nvmlGpmMetricsGet(req)
            for i, (name, _) in enumerate(_GPM_METRICS):
                m = req.metrics[i]
                if m.nvmlReturn == nv.NVML_SUCCESS:
                    setattr(s, name, float(m.value))
            d.gpm, d.gpm_t = [cur, prev], time.monotonic()
        except Exception as e:
            self._gpm_close(d)
            d.gpm_reason = f"GPM read failed ({_reason(e)})"

    def _gpm_close(self, d: _Device) -> None:
        for buf in d.gpm or ():
            try:
                self._nvml.nvmlGpmSampleFree(buf)
            except Exception:
                pass
        d.gpm = None

    # ------------------------------------------------------------------------------- reading
    def latest(self) -> list[GpuSample]:
        """The most recent sample per GPU; no NVML call, safe to use in a progress line."""
        with self._lock:
            return self._samples[-len(self._devices):] if self._devices else []

    def samples(self) -> list[GpuSample]:
        """Every kept sample (the oldest half is dropped each time ``max_samples`` is passed)."""
        with self._lock:
            return list(self._samples)

    def now(self) -> float:
        """Seconds on the samples' clock (``GpuSample.t``), to mark a window such as compilation."""
        return time.monotonic() - self._t0

    def summary(self, compiling: tuple[float, float] | None = None,
                steady: tuple[float, float] | None = None) -> GpuSummary:
        """Per-GPU statistics over the kept samples (``summarize_samples``)."""
        devices = {d.index: (d.name, d.gpm_reason) for d in self._devices}
        return summarize_samples(self.samples(), self.interval, devices, compiling, steady)


def start_sampler(interval: float) -> tuple[GpuSampler | None, str]:
    """A started sampler, or None and the sentence that says why none could start."""
    try:
        return GpuSampler(interval).start(), ""
    except GpuUnavailable as e:
        return None, str(e)


def stop_sampler(sampler: GpuSampler | None, compiling: tuple[float, float] | None = None,
                 steady: tuple[float, float] | None = None) -> GpuSummary | None:
    if sampler is None:
        return None
    sampler.stop()
    return sampler.summary(compiling, steady)


def _throttle_mask(nv, h) -> int:
    # "ClocksEventReasons" is the current name; older bindings only have "ClocksThrottleReasons".
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(fn(h))


def _init_failure(e: Exception) -> str:
    """nvmlInit's error in words a user can act on (the class names are NVML's own)."""
    name = type(e).__name__
    if "LibraryNotFound" in name:
        return "the NVIDIA driver library (libnvidia-ml.so.1) is not installed on this machine"
    if "DriverNotLoaded" in name:
        return "the NVIDIA driver is not loaded"
    if "NoPermission" in name:
        return "permission to query the NVIDIA driver was denied"
    return f"NVML did not start ({_reason(e)})"


def _reason(e: Exception) -> str:
    return (str(e) or type(e).__name__).rstrip(".")
