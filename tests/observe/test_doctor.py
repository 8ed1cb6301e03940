"""`myxtts doctor` on the CPU: exit 0, checks that apply, findings ranked with actions."""
import json

import pytest
import torch

from myxtts.cli import main
from myxtts.config import load
from myxtts.observe import doctor as D
from myxtts.observe import loaders
from myxtts.observe import machine as M
from myxtts.observe.diagnose import budget_to_fill
from myxtts.observe.measured import Measured, Settings

from ..train.conftest import FAST
from .test_profile import observe_cache  # noqa: F401 (fixture)


def test_doctor_on_cpu_finishes_with_ranked_findings(observe_cache, capsys):  # noqa: F811
    rc = main(["doctor", "--config", "tiny", "--data", str(observe_cache), *FAST, "data.num_workers=1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("no GPU: running on the CPU")
    for check in ("torch", "CPU", "buckets", "step test", "loader test", "cache disk"):
        assert f" {check} " in out
    assert "findings, ranked by expected gain" in out and "action:" in out


def test_doctor_json_has_ranked_findings(observe_cache, capsys):  # noqa: F811
    assert main(["doctor", "--config", "tiny", "--data", str(observe_cache), "--json", *FAST]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["device"] == "cpu" and r["cpu_note"]
    f = r["findings"]
    assert f and [x["rank"] for x in f] == list(range(1, len(f) + 1))
    order = ["high", "medium", "low", "info"]
    assert [order.index(x["severity"]) for x in f] == sorted(order.index(x["severity"]) for x in f)
    assert all(x["action"] and x["evidence"] for x in f)
    step = next(c for c in r["checks"] if c["name"] == "step test")
    assert step["status"] == "ok"
    assert r["measurements"]["step_ms"] > 0 and r["measurements"]["padding_pct"] is not None
    assert not any(x["rule"] == "memory" for x in f)  # GPU memory is a GPU machine's question


def test_doctor_names_the_workers_a_slow_loader_needs(observe_cache, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setattr(D, "usable_cpus", lambda: 16)
    monkeypatch.setattr(D, "measure", lambda *a, **k: {"step_ms": 10.0, "steps": 3, "loss": 3.0,
                                                       "throughput": {"frames_per_s": 1e4}})
    monkeypatch.setattr(loaders, "loader_speed", lambda cache, cfg, w, **k: {
        "workers": w, "ms_per_batch": 40.0 / max(w, 1), "batches_per_s": 25.0 * max(w, 1)})
    assert main(["doctor", "--config", "tiny", "--data", str(observe_cache), "--json", *FAST]) == 0
    r = json.loads(capsys.readouterr().out)
    loader = next(x for x in r["findings"] if x["rule"] == "loader")
    # 40 ms per batch in-process vs a 10 ms step: 40 x 1.25 head-room / 10 = 5 workers.
    assert loader["severity"] == "high" and "`data.num_workers=5`" in loader["action"]


def test_doctor_without_a_cache_still_checks_and_a_bad_path_is_a_usage_error(tmp_path, capsys):
    assert main(["doctor", "--config", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "need a cache" in out and "findings" in out
    assert main(["doctor", "--config", "tiny", "--data", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such folder" in capsys.readouterr().err


@pytest.mark.parametrize("peak_pct, flagged", [(7.2, True), (60.0, False)])
def test_doctor_flags_a_frame_budget_that_leaves_gpu_memory_unused(observe_cache, monkeypatch, peak_pct,  # noqa: F811
                                                                   flagged):
    # A CUDA machine, injected: the environment check finds an 80 GB GPU and the step test's
    # largest batch peaks at `peak_pct` of it (7 % is what the base preset used on the H100).
    def environment(doc, cfg):
        doc.note(device_name="NVIDIA H100 80GB HBM3", gpu_memory=80 << 30, bf16_supported=True)
        return torch.device("cuda", 0)

    def step_test(doc, cfg, data):
        doc.note(step_ms=90.0, loss=3.2, host_syncs_per_step=0, mem_peak_pct=peak_pct)
        return {"step_ms": 90.0, "frames_per_s": 1e5}

    monkeypatch.setattr(D, "environment", environment)
    monkeypatch.setattr(D, "step_test", step_test)
    for name in ("host", "loader_test", "disk"):
        monkeypatch.setattr(D, name, lambda *a, **k: None)
    cfg = load("tiny", FAST)
    r = D.doctor(cfg, observe_cache)
    memory = [f for f in r["findings"] if f["rule"] == "memory"]
    if not flagged:
        assert memory == []
        return
    (f,) = memory
    want = budget_to_fill(Measured(settings=Settings(frame_budget=cfg.data.frame_budget), mem_peak_pct=peak_pct))
    assert want > 10 * cfg.data.frame_budget
    assert f"`data.frame_budget={want}`" in f["action"] and "`myxtts tune` aims for" in f["action"]
    assert f"7 % of the GPU at data.frame_budget={cfg.data.frame_budget} (< 25 %)" in f["evidence"]


def test_doctor_judges_the_budget_auto_resolves_to(observe_cache, monkeypatch):  # noqa: F811
    # data.frame_budget=auto on a (injected) GPU: the buckets, the step test and the memory
    # finding all belong to the budget the sizing chose, not to data.base_frame_budget.
    from myxtts.train.sizing import with_budget

    def environment(doc, cfg):
        doc.note(device_name="NVIDIA H100 80GB HBM3", gpu_memory=80 << 30, bf16_supported=True)
        return torch.device("cuda", 0)

    seen = {}

    def step_test(doc, cfg, data):
        seen["budget"] = cfg.data.frame_budget
        doc.note(step_ms=90.0, loss=3.2, host_syncs_per_step=0, mem_peak_pct=7.2)
        return {"step_ms": 90.0, "frames_per_s": 1e5}

    def size_batches(cfg, data, device, info, probe):
        return with_budget(cfg, 4800, scale_lr=True), "data.frame_budget=auto: 4800 frames (sized)"

    monkeypatch.setattr(D, "environment", environment)
    monkeypatch.setattr(D, "step_test", step_test)
    monkeypatch.setattr(D, "size_batches", size_batches)
    for name in ("host", "loader_test", "disk"):
        monkeypatch.setattr(D, name, lambda *a, **k: None)
    cfg = load("tiny", [o for o in FAST if not o.startswith("data.frame_budget=")] + ["data.frame_budget=auto"])
    r = D.doctor(cfg, observe_cache)
    assert seen["budget"] == 4800
    assert any(c["name"] == "frame budget" and "4800" in c["detail"] for c in r["checks"])
    (f,) = [f for f in r["findings"] if f["rule"] == "memory"]
    assert "at data.frame_budget=4800 (< 25 %)" in f["evidence"]


def test_a_gpu_whose_triton_cannot_build_the_aligner_is_told_the_way_around():
    cuda = torch.device("cuda", 0)

    def broken(dev):
        return "CompilationError: at 41:8: unsupported"

    doc = M.Doc()
    M.aligner_kernels(doc, load("tiny"), cuda, check=broken)  # the default model
    (f,) = doc.findings
    assert f.severity == "high" and "train.aligner_on_host=true" in f.action and "41:8" in f.evidence
    assert [c["status"] for c in doc.checks if c["name"] == "aligner kernels"] == ["fail"]
    for cfg in (load("tiny", ["train.aligner_on_host=true"]), load("tiny", ["model.decoder=autoregressive"])):
        doc = M.Doc()
        M.aligner_kernels(doc, cfg, cuda, check=broken)
        assert not doc.findings  # the way around taken, or a model without the aligner
    doc = M.Doc()
    M.aligner_kernels(doc, load("tiny"), cuda, check=lambda dev: None)
    assert not doc.findings and doc.checks[0]["status"] == "ok"


def test_a_torch_outside_the_supported_range_is_named(monkeypatch):
    from myxtts.train.symbolic import supported_torch, torch_in_range

    spec = supported_torch()
    assert spec and torch_in_range(torch.__version__, spec)  # the installed package's own range
    assert not torch_in_range("2.10.1", spec) and torch_in_range("2.11.0+cu130", spec)
    monkeypatch.setattr(torch, "__version__", "2.10.1+cpu")
    doc = M.Doc()
    M.environment(doc, load("tiny"))
    f = next(f for f in doc.findings if f.rule == "env-torch-range")
    assert "2.10.1" in f.evidence and spec in f.action


def test_the_doctors_figures_are_typed():
    doc = M.Doc()
    doc.note(step_ms=90.0, mem_peak_pct=7.2)
    assert (doc.figures.step_ms, doc.figures.mem_peak_pct, doc.figures.loss) == (90.0, 7.2, None)
    with pytest.raises(TypeError):
        doc.note(step_msec=90.0)  # a misspelt figure fails where it is written, not in the diagnosis
