"""The run's progress line: the bar and its ETA follow what will end the run."""
from myxtts.config import load
from myxtts.train.log import TrainLog


def test_with_a_time_budget_the_bar_follows_the_clock(tmp_path):
    log = TrainLog(tmp_path, load("tiny", ["train.time_budget_s=180"]), True, True)
    log.training_started()
    log.metrics(10, {"loss": 1.5}, {}, 1e-3, 0)
    assert log._bar.total == 180 and log._bar.unit == "s" and 0 <= log._bar.n < 180
    assert "step 10/2000" in log._bar.postfix and "loss 1.5000" in log._bar.postfix
    log._bar.close()


def test_without_one_it_follows_the_steps(tmp_path):
    log = TrainLog(tmp_path, load("tiny"), True, True)
    log.training_started()
    log.metrics(10, {"loss": 1.5}, {}, 1e-3, 0)
    assert log._bar.total == 2000 and log._bar.n == 10
    log._bar.close()
