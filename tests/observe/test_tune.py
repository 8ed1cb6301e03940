"""`myxtts tune` on the CPU (workers only), and its worker search on simulated measurements (the
frame-budget search it shares with data.frame_budget=auto is tested in tests/train/test_sizing.py)."""
import yaml

from myxtts.cli import main
from myxtts.config import load
from myxtts.observe import loaders, tune

from ..train.conftest import FAST
from .test_profile import observe_cache  # noqa: F401 (fixture)


def test_tune_on_cpu_writes_an_overlay_and_a_merged_config_that_load(observe_cache, tmp_path, capsys):  # noqa: F811
    overlay = tmp_path / "out" / "tuned.yaml"
    assert main(["tune", "--config", "tiny", "--data", str(observe_cache), "--out", str(overlay), *FAST]) == 0
    out, err = capsys.readouterr()
    assert "memory search does not apply on the CPU" in err + out
    data = yaml.safe_load(overlay.read_text())
    assert list(data) == ["data"] and list(data["data"]) == ["num_workers"]  # no frame budget on CPU
    assert load(overlay).data.num_workers == data["data"]["num_workers"]
    merged = overlay.with_name("tuned.merged.yaml")
    cfg = load(merged)
    assert cfg.data.num_workers == data["data"]["num_workers"] and cfg.model.d_model == 64  # FAST kept
    assert f"myxtts train --config {merged} --data {observe_cache}" in out


def test_worker_search_picks_the_fewest_that_keep_input_bound_below_1pct(monkeypatch):
    monkeypatch.setattr(tune, "usable_cpus", lambda: 16)
    calls = []

    def speed(cache, cfg, w, **k):
        calls.append(w)
        return {"workers": w, "ms_per_batch": 40.0 / max(w, 1)}

    monkeypatch.setattr(loaders, "loader_speed", speed)
    w, why = tune.search_workers(None, None, step_ms=10.0, say=lambda s: None)
    assert w == 5  # 40/5 x 1.25 = 10 ms per batch <= the 10 ms step; 4 workers: 12.5 ms
    assert 4 in calls and "fewest" in why
    monkeypatch.setattr(loaders, "loader_speed", lambda c, f, w, **k: {"workers": w, "ms_per_batch": 0.01})
    assert tune.search_workers(None, None, step_ms=10.0, say=lambda s: None)[0] == 0
