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
from tests.train.conftest import FAST, LJ

MODES = ("eager_fp32", "eager_amp", "compiled", "compiled_cudagraphs")


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
                "--steps", "2", "--json", str(js), *overrides])
    assert rc == 0
    text = capsys.readouterr().out
    r = json.loads(js.read_text())

    assert r["device"] and r["steps"] == 2 and len(r["shapes"]) == 2  # data.max_buckets=2
    for mode in MODES:
        m = r["train"][mode]
        assert {"frames_per_s", "mfu", "samples_per_s", "step_ms", "skipped", "reason"} <= set(m)
        assert mode in text
        if m["skipped"]:
            assert m["reason"] and m["frames_per_s"] is None and m["mfu"] is None
        else:
            assert m["frames_per_s"] > 0 and m["samples_per_s"] > 0 and m["step_ms"] > 0
            assert m["recompiles_after_warmup"] == 0 and math.isfinite(m["loss"])
    for mode in ("eager_fp32", "compiled"):
        assert not r["train"][mode]["skipped"]
    assert r["train"]["compiled"]["graphs_compiled_in_warmup"] >= 2  # one per bucket shape
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
