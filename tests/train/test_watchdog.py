"""The stall watchdog's judgement, on a store in memory: who is missing, and when nobody is;
and torch's own NCCL watchdog switched on. Two processes stalling: tests/train/test_distributed.py."""
import os

from myxtts.train import distributed as D
from myxtts.train.watchdog import Watchdog


class Store:
    """The three calls of a torch.distributed store the watchdog makes."""

    def __init__(self):
        self.keys = {}

    def set(self, key, value):
        self.keys[key] = value.encode()

    def get(self, key):
        return self.keys[key]

    def check(self, keys):
        return all(k in self.keys for k in keys)


def _at(store, rank, beat, moves, step, phase):
    store.set(f"r{rank}", f"{beat} {moves} {step} {phase}")


def _watchdog(store):
    w = Watchdog(store, rank=0, world_size=3, timeout_s=5.0)
    w.stop()  # judged by hand below, at chosen times
    w.phase("loading", 1)
    w.phase("step", 1)
    w.phase("loading", 2)  # its first step done: armed
    w.phase("step", 2)
    return w


def _seen(w, store, now, **beats):
    for r, (beat, moves, step, phase) in beats.items():
        _at(store, int(r[1:]), beat, moves, step, phase)
    w._read(now)
    w._moved_at[0] = 0.0


def test_the_rank_behind_is_named_once_nobody_has_moved_on_for_the_timeout():
    store = Store()
    w = _watchdog(store)
    _seen(w, store, 0.0, r1=(1, 4, 2, "step"), r2=(1, 3, 2, "loading"))
    _seen(w, store, 4.0, r1=(2, 4, 2, "step"), r2=(2, 3, 2, "loading"))
    assert w._missing(4.0) == []  # not yet the timeout
    assert w._missing(5.0) == [2]
    assert "rank 2: last at step 2 (loading), not moved on for 5 s; its process is alive" == w._describe(2, 5.0)


def test_nobody_is_missing_while_every_rank_is_at_the_same_place_and_beating():
    store = Store()
    w = _watchdog(store)
    _seen(w, store, 0.0, r1=(1, 4, 2, "step"), r2=(1, 4, 2, "step"))
    _seen(w, store, 9.0, r1=(9, 4, 2, "step"), r2=(9, 4, 2, "step"))
    assert w._missing(9.0) == []


def test_a_rank_that_stopped_beating_is_named_even_where_the_others_are():
    store = Store()
    w = _watchdog(store)
    _seen(w, store, 0.0, r1=(1, 4, 2, "step"), r2=(1, 4, 2, "step"))
    _seen(w, store, 6.0, r1=(7, 4, 2, "step"))  # rank 2's process is gone
    assert w._missing(6.0) == [2]
    assert "its process stopped beating 6 s ago" in w._describe(2, 6.0)


def test_a_rank_that_left_after_the_run_is_never_missing_and_the_one_behind_may_be_this_one():
    store = Store()
    w = _watchdog(store)
    _seen(w, store, 0.0, r1=(1, 9, 2, "done"), r2=(1, 9, 2, "saved"))
    w.phase("checkpoint", 2)  # rank 0 still writing while rank 2 waits at the barrier
    _seen(w, store, 5.0, r2=(2, 9, 2, "saved"))
    assert w._missing(5.0) == [0]
    assert w._describe(0, 5.0) == "rank 0 (this one): last at step 2 (checkpoint)"


def test_nccl_flight_recorder_dumps_into_the_run_and_a_users_setting_wins(tmp_path, monkeypatch):
    for name in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                 "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "50")
    from myxtts.rundir import RunDir

    trace = RunDir(tmp_path / "run").nccl_trace
    D.flight_recorder(trace)
    assert os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(tmp_path / "run" / "nccl-trace" / "rank")
    assert trace.parent.is_dir() and os.environ["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "50"
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
