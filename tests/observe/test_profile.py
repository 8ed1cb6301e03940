"""`myxtts profile` on the CPU, its kernel statistics from a GPU profile, and the FLOP/peak table."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from myxtts.cli import main
from myxtts.config import load
from myxtts.data.prepare import prepare
from myxtts.observe import flops
from myxtts.observe.profile import PHASES, _device_stats

from ..train.conftest import FAST, LJ


@pytest.fixture
def observe_cache(tmp_path_factory) -> Path:
    """One small LJSpeech cache per test session, shared by the observe command tests."""
    root = tmp_path_factory.getbasetemp() / "observe-lj-cache"
    if not (root / "meta.json").is_file():
        prepare(LJ, root, load("tiny"), progress=False)
    return root


def test_profile_on_cpu_prints_breakdown_writes_trace_and_classifies(observe_cache, tmp_path, capsys):
    out, js = tmp_path / "prof", tmp_path / "prof.json"
    rc = main(["profile", "--config", "tiny", "--data", str(observe_cache), "--steps", "2",
               "--out", str(out), "--json", str(js), *FAST])
    assert rc == 0
    text, err = capsys.readouterr()
    assert "Traceback" not in err and "no GPU" in err
    for phase in PHASES:
        assert phase in text
    assert "CPU" in text and "host syncs per step: not measurable on CPU" in text
    assert "verdict: cpu" in text and "top CPU ops" in text

    trace = json.loads((out / "trace.json").read_text())  # a valid Chrome trace
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"myxtts/forward", "myxtts/backward", "myxtts/optimizer"} <= names
    assert (out / "report.html").is_file()

    r = json.loads(js.read_text())
    assert r["steps"] == 2 and r["device"] == "cpu" and "CPU" in r["timing"]
    assert list(r["breakdown"]) == list(PHASES)
    assert all(v["ms"] >= 0 for v in r["breakdown"].values())
    assert r["breakdown"]["forward"]["ms"] > 0 and r["breakdown"]["backward"]["ms"] > 0
    assert r["recompiles"] == 0 and r["host_syncs_per_step"] is None
    assert r["flops_per_step"] > 0 and r["mfu_pct"] is None
    assert r["diagnosis"]["bound"] == "cpu" and r["top"]


def _ev(name, start, end, kind=None, annotation=False):
    return SimpleNamespace(name=name, device_type=DeviceType.CUDA, activity_type=kind,
                           is_user_annotation=annotation, time_range=SimpleNamespace(start=start, end=end))


@pytest.mark.parametrize("typed", [True, False], ids=["activity-type", "older-torch"])
def test_device_stats_count_kernels_only(typed):
    # Two steps: kernels busy 0-40 and 50-90 us (two overlapping on streams), a copy 30-60 us of
    # which 50-60 overlaps a kernel, a memset, and what must not count as GPU work: the
    # record_function range the profiler mirrors onto the GPU timeline (spanning both steps, as
    # `myxtts/forward+loss` did in the real H100 trace), a ProfilerStep range, a stream sync and
    # a host op.
    def ev(name, a, b, kind):
        return _ev(name, a, b, kind if typed else None, annotation=kind == "gpu_user_annotation")

    events = [ev("gemm", 0, 30, "kernel"), ev("gemm", 10, 40, "kernel"), ev("softmax", 50, 90, "kernel"),
              ev("Memcpy HtoD (Pinned -> Device)", 30, 60, "gpu_memcpy"), ev("Memset (Device)", 95, 96, "gpu_memset"),
              ev("myxtts/forward+loss", 0, 100, "gpu_user_annotation"),
              ev("ProfilerStep#3", 0, 100, "gpu_user_annotation"), ev("Stream Sync", 90, 100, "cuda_sync"),
              SimpleNamespace(name="aten::mm", device_type=DeviceType.CPU,
                              time_range=SimpleNamespace(start=0, end=500))]
    s = _device_stats(SimpleNamespace(events=lambda: events), steps=2, step_ms=0.05)
    assert s["kernels_per_step"] == 1.5
    assert s["median_kernel_us"] == 30
    assert s["gpu_busy_pct"] == pytest.approx(80.0)  # 80 us busy / 2 steps / 50 us per step
    assert s["h2d_exposed_ms"] == pytest.approx(0.005)  # 40-50 exposed: 10 us over 2 steps
    assert [t["name"] for t in s["top"]] == ["gemm", "softmax"] and s["top"][0]["calls"] == 2


def test_peak_table_and_mfu():
    assert flops.peak_tflops("NVIDIA H100 80GB HBM3")[0] == 989
    assert flops.peak_tflops("NVIDIA H100 PCIe")[0] == 756
    assert flops.peak_tflops("NVIDIA A100-SXM4-80GB")[0] == 312
    assert flops.peak_tflops("NVIDIA H200")[0] == 989
    peak, basis = flops.peak_tflops("NVIDIA GeForce RTX 4090")
    assert peak is None and "unknown peak" in basis
    m = flops.mfu(989e12 * 0.5, 1.0, "NVIDIA H100 80GB HBM3")
    assert m["mfu_pct"] == pytest.approx(50.0) and "H100 SXM" in m["mfu_basis"]
    assert flops.mfu(1e12, 1.0, "CPU")["mfu_pct"] is None
