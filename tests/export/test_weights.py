"""Which weights a run is spoken (and exported) with: the lowest held-out WER where the periodic
evaluation scored kept checkpoints, else the lowest validation loss, else the newest."""
import json
import shutil

import pytest

from myxtts.errors import UserError
from myxtts.rundir import choose_weights


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


def test_every_way_of_speaking_a_run_takes_the_same_weights_and_says_why(run):
    """synthesize, serve and eval load through Synthesizer; --init-from through finetune.find."""
    from myxtts.infer import Synthesizer
    from myxtts.train.finetune import find

    log(run, {"step": 6, "loss": None, "eval_wer": 0.2}, {"step": 8, "loss": None, "eval_wer": 0.4})
    said: list[str] = []
    synth = Synthesizer(run, "griffin-lim", "cpu", log=said.append)
    chosen = run / "checkpoints" / "step-00000006" / "model.safetensors"
    assert synth.meta["path"] == str(chosen)
    assert said[0] == f"weights: {chosen}: step 6: the lowest held-out WER of the periodic evaluation " \
                      "(20.0%, speaker cosine 0.000) among 2 scored checkpoint(s)"
    assert find(run).path == chosen.resolve()
    said.clear()
    Synthesizer(run, "griffin-lim", "cpu", log=said.append, step=4)
    assert said[0].endswith("step-00000004/model.safetensors: step 4, as asked")
    with pytest.raises(UserError, match="is not a run folder"):
        choose_weights(run / "checkpoints" / "step-00000004", 4)
