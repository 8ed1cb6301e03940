"""A run's folder: its layout, the cache it records, and the weights that speak for it."""
import pytest

from myxtts.errors import UserError
from myxtts.rundir import RunDir, default_cache


def _weights(run: RunDir, step: int) -> None:
    run.step_weights(step).parent.mkdir(parents=True)
    run.step_weights(step).write_bytes(b"")


def test_a_run_is_found_from_any_of_its_files(tmp_path):
    run = RunDir(tmp_path / "run")
    _weights(run, 4)
    assert RunDir.of(run.step_weights(4)).path == run.path.resolve()
    assert RunDir.of(run.path).path == run.path.resolve()
    assert RunDir.of(tmp_path) is None  # a folder that holds no checkpoints/ is no run
    assert run.kept_steps() == [4] and run.newest_weights() == run.step_weights(4)
    assert not run.vocoder.has_weights()


def test_the_cache_is_what_training_recorded_never_a_guess(tmp_path):
    run = RunDir(tmp_path / "run")
    _weights(run, 1)
    (tmp_path / "cache").mkdir()  # beside the run, as a demo lays it out: not read as the run's
    with pytest.raises(UserError, match="--data CACHE is needed"):
        default_cache(run.path)
    run.record_cache(tmp_path / "cache")
    assert run.cache() == (tmp_path / "cache").resolve() == default_cache(run.step_weights(1))
    (tmp_path / "cache").rmdir()
    with pytest.raises(UserError, match="is gone"):
        default_cache(run.path)


def test_the_metrics_are_read_up_to_a_line_cut_by_a_crash(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.read_metrics() == []  # no file yet
    run.path.mkdir()
    run.metrics.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": null, "eval_wer": 0.5}\n{"step": 3, "lo')
    assert run.read_metrics() == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": None, "eval_wer": 0.5}]
