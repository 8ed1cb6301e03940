"""The loop's out-of-memory message: one line naming the stage's own setting and a smaller value
that the settings accept."""
import dataclasses
from types import SimpleNamespace

from myxtts.config import MIN_FRAME_BUDGET, MIN_SEGMENT_FRAMES, load
from myxtts.train.loop import oom_error


def _run(stage: str, **data_or_vocoder):
    cfg = load("tiny")
    section = "vocoder" if stage == "vocoder" else "data"
    cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **data_or_vocoder)})
    return SimpleNamespace(cfg=cfg, stage=stage)


def test_acoustic_oom_halves_the_frame_budget_down_to_the_settings_minimum():
    assert "try data.frame_budget=6000 " in str(oom_error(_run("acoustic", frame_budget=12000)))
    msg = str(oom_error(_run("acoustic", frame_budget=100)))
    assert f"try data.frame_budget={MIN_FRAME_BUDGET} " in msg and "myxtts tune" in msg


def test_vocoder_oom_names_the_segment_length_not_the_frame_budget():
    msg = str(oom_error(_run("vocoder", segment_frames=32)))
    assert "try vocoder.segment_frames=16 " in msg and "frame_budget" not in msg
    assert f"vocoder.segment_frames={MIN_SEGMENT_FRAMES} " in str(oom_error(_run("vocoder", segment_frames=10)))
