"""`benchmarks/gpu_attention.py` on a CPU: the attention with its key-padding bias folded into an
extra head dimension (no mask, so Flash kernels take it) agrees with the exact computation and with
what the model runs today, and a fold that lost its bias is caught."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("gpu_attention", ROOT / "benchmarks" / "gpu_attention.py")
gpu_attention = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_attention)


def agreement(report: dict) -> dict:
    return {(tuple(r["shape"]), r["attention"], n): c["agreement"]["ok"]
            for r in report["results"] for n, c in r["candidates"].items()}


def run(tmp_path, *args) -> dict:
    import json
    out = tmp_path / "attention.json"
    rc = gpu_attention.main(["--config", "tiny", "--json", str(out), *args])
    report = json.loads(out.read_text())
    assert (rc == 0) == report["ok"]
    return report


def test_the_folded_bias_agrees_with_the_masked_attention(tmp_path):
    report = run(tmp_path, "--shapes", "3,7,12;2,5,20")
    assert report["status"] == "done" and report["ok"], report
    assert set(agreement(report).values()) == {True} and len(agreement(report)) == 8
    for r in report["results"]:  # padded keys were there to mask
        assert r["padded_keys"] > 0 and r["candidates"]["flash_folded"]["agreement"]["out"] < 1e-5
    assert report["fastest"] == {} and "CUDA" in report["not_run"]  # no timings on a CPU


def test_a_fold_without_its_bias_disagrees(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_attention, "FOLD_BIAS", 0.0)  # padded keys no longer masked
    report = run(tmp_path, "--shapes", "3,7,12")
    assert not report["ok"]
    assert not agreement(report)[((3, 7, 12), "frames", "flash_folded")]
    assert agreement(report)[((3, 7, 12), "frames", "default")]


def test_its_timeout_stops_it_with_what_ran_and_blames_no_kernel(tmp_path, monkeypatch):
    import time

    measured = gpu_attention.agreement

    def slow(name, *args):
        time.sleep(0.7)  # long enough that the second shape's candidates run out of time
        return measured(name, *args)

    monkeypatch.setattr(gpu_attention, "agreement", slow)
    report = run(tmp_path, "--shapes", "3,7,12;2,5,20", "--timeout-s", "2")
    assert report["status"] == "timed out" and not report["ok"] and "stopped after" in report["error"]
    ran = [c for r in report["results"] for c in r.get("candidates", {}).values()]
    assert ran and all("agreement" in c for c in ran)  # none taken for a refusal


def test_the_fastest_candidate_is_one_that_agreed_and_replayed():
    ok = {"ok": True, "agreement": {"ok": True}, "cuda_graph": {"ok": True}}
    results = [{"attention": "frames", "candidates": {
        "efficient": {**ok, "ms_forward_backward": 2.0}, "cudnn": {**ok, "ms_forward_backward": 1.0},
        "flash_folded": {**ok, "ok": False, "ms_forward_backward": 0.5}}}]
    assert gpu_attention.fastest(results) == {"frames": {
        "ms_summed_over_shapes": {"efficient": 2.0, "cudnn": 1.0}, "fastest": "cudnn", "speedup_over_efficient": 2.0}}


@pytest.mark.parametrize("shapes", ["3,7", "a,b,c", "3,0,5"])
def test_bad_shapes_are_one_clear_line(shapes, capsys):
    with pytest.raises(SystemExit) as e:
        gpu_attention.main(["--shapes", shapes])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        f"--shapes takes positive B,TT,TM triples separated by ';', got {shapes!r}")
