"""A stand-in for ``pynvml`` so the sampler's logic is tested without a GPU or the NVML library."""
from __future__ import annotations

from types import SimpleNamespace


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    def __str__(self):
        return "NVML Shared Library Not Found"


class _MetricsGet:
    def __init__(self):
        self.version = 0
        self.numMetrics = 0
        self.sample1 = self.sample2 = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=-1, value=0.0) for _ in range(8)]


class FakeNvml:
    NVML_CLOCK_SM = 1
    NVML_SUCCESS = 0
    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_GPM_METRIC_SM_UTIL = 2
    NVML_GPM_METRIC_SM_OCCUPANCY = 3
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
    c_nvmlGpmMetricsGet_t = _MetricsGet

    def __init__(self, utils=(95.0,), *, count=None, init_error=None, gpm=True, power_supported=True,
                 throttle_mask=0x4, sm_active=70.0):
        self.utils = list(utils)           # per GPU, constant utilisation
        self.count = len(self.utils) if count is None else count
        self.init_error, self.gpm, self.power_supported = init_error, gpm, power_supported
        self.throttle_mask, self.sm_active = throttle_mask, sm_active
        self.calls = {"power": 0, "init": 0, "shutdown": 0, "gpm_free": 0}

    def nvmlInit(self):
        self.calls["init"] += 1
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.calls["shutdown"] += 1

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"Fake H100"

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.utils[h], memory=30)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=40 * 2**30, total=80 * 2**30, free=40 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h):
        self.calls["power"] += 1
        if not self.power_supported:
            raise NVMLError_NotSupported()
        return 650_000

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.throttle_mask

    def nvmlGpmQueryDeviceSupport(self, h):
        return SimpleNamespace(isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self):
        return object()

    def nvmlGpmSampleGet(self, h, s):
        return s

    def nvmlGpmSampleFree(self, s):
        self.calls["gpm_free"] += 1

    def nvmlGpmMetricsGet(self, req):
        values = {2: self.sm_active, 3: 40.0, 5: 55.0}
        for m in req.metrics[:req.numMetrics]:
            m.value, m.nvmlReturn = values[m.metricId], 0
        return req
