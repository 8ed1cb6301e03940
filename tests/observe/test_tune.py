"""`myxtts tune` on the CPU (workers only), and its two searches on simulated measurements."""
import yaml

from myxtts.cli import main
from myxtts.config import load
from myxtts.observe import probes as rig
from myxtts.observe import tune

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


class FakeProbe:
    """Fits up to ``limit`` frames; batch shapes stop changing above ``cap`` (max_batch_size)."""

    def __init__(self, limit, cap=10**9):
        self.limit, self.cap, self.trials = limit, cap, []

    def fits(self, b):
        ok = b <= self.limit
        self.trials.append({"frame_budget": b, "largest_shape": [1, 1, 1], "oom": not ok,
                            "peak_pct": 50.0, "fits": ok})
        return ok, [(min(b, self.cap) // 64, 1, 64)]


def test_budget_search_doubles_then_bisects_below_the_limit():
    p = FakeProbe(limit=50_000)
    best, note = tune.search_budget(p, 4000, say=lambda s: None)
    assert 50_000 * (1 - tune.RESOLUTION) - 64 <= best <= 50_000 and "memory" in note
    assert all(t["fits"] == (t["frame_budget"] <= 50_000) for t in p.trials)


def test_budget_search_shrinks_from_a_start_that_does_not_fit():
    best, _ = tune.search_budget(FakeProbe(limit=3000), 12_000, say=lambda s: None)
    assert 3000 * (1 - tune.RESOLUTION) - 64 <= best <= 3000
    assert tune.search_budget(FakeProbe(limit=10), 4000, say=lambda s: None)[0] is None


def test_budget_search_stops_when_max_batch_size_caps_the_shapes():
    best, note = tune.search_budget(FakeProbe(limit=10**7, cap=16_000), 4000, say=lambda s: None)
    assert best == 16_000 and "max_batch_size" in note


def test_worker_search_picks_the_fewest_that_keep_input_bound_below_1pct(monkeypatch):
    monkeypatch.setattr(rig, "usable_cpus", lambda: 16)
    calls = []

    def speed(cache, cfg, w, **k):
        calls.append(w)
        return {"workers": w, "ms_per_batch": 40.0 / max(w, 1)}

    monkeypatch.setattr(rig, "loader_speed", speed)
    w, trials, why = tune.search_workers(None, None, step_ms=10.0, say=lambda s: None)
    assert w == 5  # 40/5 x 1.25 = 10 ms per batch <= the 10 ms step; 4 workers: 12.5 ms
    assert 4 in calls and "fewest" in why
    monkeypatch.setattr(rig, "loader_speed", lambda c, f, w, **k: {"workers": w, "ms_per_batch": 0.01})
    assert tune.search_workers(None, None, step_ms=10.0, say=lambda s: None)[0] == 0
