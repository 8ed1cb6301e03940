import json
import time

import pytest

from myxtts.errors import UserError
from myxtts.observe.gpu import GpuSampler, GpuUnavailable
from myxtts.observe.gpu_summary import (
    CompileWindow,
    GpuSample,
    GpuSummary,
    decode_throttle,
    read_csv,
    summarize_gpu,
    summarize_samples,
    write_csv,
)

from .fake_nvml import FakeNvml, NVMLError_LibraryNotFound


def test_decode_throttle_names_bits_and_keeps_unknown_ones():
    assert decode_throttle(0) == ()
    assert decode_throttle(0x4 | 0x40) == ("sw_power_cap", "hw_thermal")
    assert decode_throttle(0x1 | 0x10000) == ("gpu_idle", "0x10000")


def _wait_for(sampler, n):
    deadline = time.monotonic() + 5
    while len(sampler.samples()) < n and time.monotonic() < deadline:
        time.sleep(0.02)


def test_sampler_reads_every_gpu_and_summarises(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nv = FakeNvml(utils=(95.0, 20.0))
    with GpuSampler(0.1, nvml=nv) as s:
        assert [x.gpu for x in s.latest()] == [0, 1]  # a sample exists right after start()
        _wait_for(s, 8)
        line = s.latest()[0].short()
    assert nv.calls["shutdown"] == 1 and nv.calls["gpm_free"] == 4
    assert "gpu0 95%" in line and "sm 70%" in line and "throttle:sw_power_cap" in line
    summ = s.summary()
    g0, g1 = summ.gpus
    assert g0.name == "Fake H100" and g0.util.verdict == "steady"
    assert g1.util.verdict == "starved"
    assert g0.sm_active.mean == 70.0 and g0.sm_occupancy_mean == 40.0 and g0.tensor_active_mean == 55.0
    assert g0.mem_total_mib == 80 * 1024 and g0.power_mean_w == 650.0
    assert g0.throttle_pct == {"sw_power_cap": 100.0}
    assert GpuSummary.from_dict(json.loads(json.dumps(summ.as_dict()))) == summ  # summary.json and back


def test_unsupported_fields_fail_soft_and_are_not_asked_again(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nv = FakeNvml(power_supported=False, gpm=False)
    with GpuSampler(0.1, nvml=nv) as s:
        _wait_for(s, 4)
    assert nv.calls["power"] == 1
    g = s.summary().gpus[0]
    assert g.power_mean_w is None and g.sm_active is None
    assert "GPM" in g.gpm_reason and g.util.mean == 95.0


def test_no_library_raises_one_sentence():
    with pytest.raises(GpuUnavailable) as e:
        GpuSampler(nvml=FakeNvml(init_error=NVMLError_LibraryNotFound())).start()
    msg = str(e.value)
    assert isinstance(e.value, UserError)
    assert "libnvidia-ml" in msg and msg.endswith(".") and msg.count(". ") == 0 and "\n" not in msg


def test_no_devices_raises(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nv = FakeNvml(utils=(), count=0)
    with pytest.raises(GpuUnavailable, match="no NVIDIA GPU is visible"):
        GpuSampler(nvml=nv).start()
    assert nv.calls["shutdown"] == 1


def test_cuda_visible_devices_selects_and_renumbers(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with GpuSampler(0.1, nvml=FakeNvml(utils=(95.0, 20.0))) as s:
        latest = s.latest()
    assert len(latest) == 1 and latest[0].gpu == 0 and latest[0].util == 20.0  # torch's cuda:0


def test_csv_round_trip(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with GpuSampler(0.1, nvml=FakeNvml(power_supported=False)) as s:
        _wait_for(s, 3)
    samples = s.samples()
    write_csv(samples, tmp_path / "g.csv")
    back = read_csv(tmp_path / "g.csv")
    assert back == samples
    assert summarize_gpu(back).util == s.summary().gpus[0].util


def test_the_memory_cap_keeps_the_newest_samples(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    s = GpuSampler(0.1, nvml=FakeNvml(), max_samples=4)
    s.start()
    s.stop()  # drive ticks by hand: deterministic, no thread
    for _ in range(12):
        s._tick()
    kept = s.samples()
    assert 2 <= len(kept) <= 4 and kept[-1] is s.latest()[0]


def test_samples_inside_the_compile_window_are_counted_apart():
    # 100 s at 0 % while compiling, then 100 s of training at ~95 %: the training reads steady,
    # not oscillating, and the compile window is summarised on its own.
    samples = [GpuSample(t=float(t), gpu=0, util=0.0 if t < 100 else 95.0 + (t % 3)) for t in range(200)]
    whole = summarize_samples(samples, 1.0)
    assert whole.gpus[0].util.verdict == "oscillating" and whole.compiling is None
    split = summarize_samples(samples, 1.0, compiling=(0.0, 99.5))
    g = split.gpus[0]
    assert g.util.verdict == "steady" and g.util.n == 100
    assert split.compiling == CompileWindow(from_s=0.0, to_s=99.5, seconds=99.5, samples=100, util_mean=0.0)
