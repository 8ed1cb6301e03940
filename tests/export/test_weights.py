"""Which weights a run is exported (spoken) with: the lowest held-out WER where the periodic
evaluation scored kept checkpoints, else the lowest validation loss, else the newest."""
import json
import shutil

import pytest

from myxtts.errors import UserError
from myxtts.models.checkpoint import choose_weights


@pytest.fixture
def run(voice_run, tmp_path):
    """Three kept checkpoints (the same weights: only the choice is under test)."""
    run = tmp_path / "run"
    model = voice_run[0] / "checkpoints" / "step-00000003" / "model.safetensors"
    for step in (4, 6, 8):
        (run / "checkpoints" / f"step-{step:08d}").mkdir(parents=True)
        shutil.copy(model, run / "checkpoints" / f"step-{step:08d}" / "model.safetensors")
    return run


def log(run, *rows):
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_lowest_wer_of_a_kept_checkpoint_then_speaker_similarity(run):
    log(run, {"step": 2, "loss": None, "eval_wer": 0.1},  # not kept: cannot be exported
        {"step": 4, "loss": 3.0}, {"step": 4, "loss": None, "eval_wer": 0.5, "eval_speaker_cosine": 0.6},
        {"step": 6, "loss": None, "eval_wer": 0.3, "eval_speaker_cosine": 0.5},
        {"step": 8, "loss": None, "eval_wer": 0.3, "eval_speaker_cosine": 0.7})
    (run / "best").mkdir()
    shutil.copy(run / "checkpoints" / "step-00000004" / "model.safetensors", run / "best")
    path, why = choose_weights(run)
    assert path == run / "checkpoints" / "step-00000008" / "model.safetensors"
    assert why.startswith("step 8: the lowest held-out WER") and "30.0%" in why and "3 scored" in why


def test_without_periodic_evaluation_the_lowest_validation_loss_then_the_newest(run):
    log(run, {"step": 4, "loss": 3.0})
    assert choose_weights(run)[0].parent.name == "step-00000008"
    (run / "best").mkdir()
    shutil.copy(run / "checkpoints" / "step-00000004" / "model.safetensors", run / "best")
    path, why = choose_weights(run)
    assert path == run / "best" / "model.safetensors" and "validation loss" in why


def test_a_step_asked_for(run):
    assert choose_weights(run, 6)[0].parent.name == "step-00000006"
    with pytest.raises(UserError, match="kept: 4, 6, 8"):
        choose_weights(run, 5)
