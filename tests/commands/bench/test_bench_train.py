"""`myxtts bench train --quick` on a tiny LJSpeech cache: every mode reported, none recompiling
after warm-up. Behaviour only; the timings of a shared CPU are not asserted."""
import argparse
import json
import math
from pathlib import Path

import pytest
import torch

from myxtts.commands.bench import MODES as BENCH_MODES
from myxtts.commands.bench import train
from myxtts.config import load
from myxtts.data.prepare import prepare
from myxtts.errors import UserError
from myxtts.observe import modes
from tests.train.conftest import FAST, LJ

MODES = ("eager_fp32", "eager_amp", "compiled", "compiled_cudagraphs", "compiled_regional")


@pytest.fixture
def bench_cache(tmp_path_factory) -> Path:
    root = tmp_path_factory.getbasetemp() / "bench-lj-cache"
    if not (root / "meta.json").is_file():
        prepare(LJ, root, load("tiny"), progress=False)
    return root


def bench(argv: list[str]) -> int:
    """`myxtts bench train ARGV`, parsed as ``myxtts.commands.bench.add_parser`` sets the mode up."""
    assert BENCH_MODES["train"] == "myxtts.commands.bench.train"
    parser = argparse.ArgumentParser(prog="myxtts bench train")
    train.add_arguments(parser)
    return train.run(parser.parse_args(argv))


def test_bench_train_quick_reports_every_mode_without_recompiles(bench_cache, tmp_path, capsys):
    js = tmp_path / "train.json"
    overrides = [o for o in FAST if o != "train.compile=off"]
    rc = bench(["--config", "tiny", "--data", str(bench_cache), "--quick",
                "--steps", "3", "--json", str(js), *overrides])  # a timed step of every shape
    assert rc == 0
    text = capsys.readouterr().out
    r = json.loads(js.read_text())

    assert r["device"] and r["steps"] == 3 and len(r["shapes"]) == 2  # 2 buckets, one shape each
    for mode in MODES:
        m = r["train"][mode]
        assert {"frames_per_s", "mfu", "samples_per_s", "step_ms", "skipped", "reason"} <= set(m)
        assert mode in text
        if m["skipped"]:
            assert m["reason"] and m["frames_per_s"] is None and m["mfu"] is None
        else:
            assert m["frames_per_s"] > 0 and m["samples_per_s"] > 0 and m["step_ms"] > 0
            assert m["recompiles_after_warmup"] == 0 and math.isfinite(m["loss"])
    for mode in ("eager_fp32", "compiled", "compiled_regional"):
        assert not r["train"][mode]["skipped"]
    assert r["train"]["compiled_regional"]["compile"] == "regional"
    # one graph for every shape, and one more for a batch of one (PyTorch compiles a size-1
    # dimension as a constant)
    assert r["train"]["compiled"]["graphs_compiled_in_warmup"] == 1 + any(s[0] == 1 for s in r["shapes"])
    comp = r["train"]["compiled"]
    assert set(comp["compile_s_by_shape"]) == {"x".join(map(str, s)) for s in r["shapes"]}
    assert comp["compile_s"] == pytest.approx(sum(comp["compile_s_by_shape"].values()))
    assert comp["compile_s"] > 0 and comp["ops_per_step"] is None
    for mode in ("eager_fp32", "compiled"):  # from the start of the mode, building included
        m = r["train"][mode]
        # None: 3 steps on a busy machine did not settle to full speed (a timing, not asserted)
        full = m["time_to_full_speed_s"]
        assert full is None or m["build_s"] < full  # counted from before the run was built
    eager = r["train"]["eager_fp32"]
    assert eager["compile_s"] is None and eager["ops_per_step"] > 100  # a real step's ops
    assert eager["host_sync_ops_per_step"] == 0 and eager["ops_shape"] in r["shapes"]
    assert r["modes_pending"] == []
    assert r["train"]["recompiles_after_warmup"] == 0
    assert r["compile_speedup"] > 0
    assert "compile speedup" in text

    if not torch.cuda.is_available():
        cg = r["train"]["compiled_cudagraphs"]
        assert cg["skipped"] and "CUDA" in cg["reason"]
        for mode in MODES:  # no peak for a CPU: MFU None, with the reason
            m = r["train"][mode]
            assert m["mfu"] is None and m["mfu_reason"]
        assert r["compile_backend"] == "aot_eager"
        assert "CPU quick mode: compiled with aot_eager; speed figures are not inductor's" in text


def test_bench_train_modes_selects_and_writes_each_mode_when_it_finishes(bench_cache, tmp_path, monkeypatch):
    """--modes runs only the named modes; the JSON holds a finished mode even when a later one
    never finishes (a run cut short by a time limit)."""
    js = tmp_path / "train.json"
    real = modes.run_mode

    def second_mode_dies(cfg, data, batches, steps, precision, *args):
        if precision != "fp32":
            raise KeyboardInterrupt  # as a time limit would stop it
        return real(cfg, data, batches, steps, precision, *args)

    monkeypatch.setattr(modes, "run_mode", second_mode_dies)
    overrides = [o for o in FAST if o != "train.compile=off"]
    args = ["--config", "tiny", "--data", str(bench_cache), "--quick", "--steps", "1",
            "--json", str(js), *overrides]
    amp, _ = modes.amp_precision(torch.device("cpu"))
    if amp:
        with pytest.raises(KeyboardInterrupt):
            bench(args + ["--modes", "eager_amp,eager_fp32"])
        r = json.loads(js.read_text())
        assert r["modes_pending"] == ["eager_amp"]
        assert not r["train"]["eager_fp32"]["skipped"] and r["train"]["eager_fp32"]["ops_per_step"] > 100

    monkeypatch.setattr(modes, "run_mode", real)
    assert bench(args + ["--modes", "eager_fp32"]) == 0
    r = json.loads(js.read_text())
    assert r["modes_selected"] == ["eager_fp32"] and r["modes_pending"] == []
    assert not r["train"]["eager_fp32"]["skipped"]
    for mode in ("eager_amp", "compiled", "compiled_cudagraphs", "compiled_regional"):
        assert r["train"][mode]["skipped"] and "--modes" in r["train"][mode]["reason"]


def test_bench_train_rejects_unknown_modes(bench_cache):
    with pytest.raises(UserError, match="unknown mode fast.*choose from eager_fp32"):
        bench(["--data", str(bench_cache), "--quick", "--modes", "eager_fp32,fast"])


def test_bench_train_resolves_an_auto_budget_once_for_its_batches_and_every_mode(bench_cache, tmp_path,
                                                                                  monkeypatch, capsys):
    """data.frame_budget=auto is sized once before any mode (a GPU would measure memory there):
    the fixed batches and every mode's run use that budget, so no mode's time holds a search."""
    from myxtts.train import build
    from myxtts.train.sizing import with_budget

    calls = []

    def size_batches(cfg, data, device, info, given=None, probe=None):
        calls.append(cfg.data.frame_budget)
        if cfg.data.frame_budget != "auto":
            return cfg, ""
        return with_budget(cfg, 1600, scale_lr=True), "data.frame_budget=auto: 1600 frames (sized)"

    monkeypatch.setattr(build.S, "size_batches", size_batches)
    js = tmp_path / "train.json"
    overrides = [o for o in FAST if not o.startswith("data.frame_budget=")] + ["data.frame_budget=auto"]
    assert bench(["--config", "tiny", "--data", str(bench_cache), "--quick", "--steps", "1",
                  "--modes", "eager_fp32", "--json", str(js), *overrides]) == 0
    r = json.loads(js.read_text())
    assert r["frame_budget"] == 1600 and calls[0] == "auto"
    assert all(c == 1600 for c in calls[1:])  # the mode's run got the resolved budget, no search
    assert all(b * tm <= 1600 for b, _, tm in r["shapes"])
    assert "data.frame_budget=auto: 1600 frames (sized)" in capsys.readouterr().out
