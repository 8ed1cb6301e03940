"""``python -m myxtts`` for the DDP tests, with one fault on one rank, as the environment names
it: ``MYXTTS_TEST_FAULT=KIND:RANK:STEP``, KIND ``kill`` (SIGKILL itself) or ``stall`` (sleep for
good), as rank RANK starts loading step STEP, in the group's first attempt only (a group
torchrun restarts runs clean). Run by torchrun in place of ``-m myxtts``, with the same arguments.
"""
import os
import signal
import sys
import time

from myxtts.cli import main
from myxtts.train.loop import Loop


class _Faulty:
    """The loop's batches, until the step the fault is set for."""

    def __init__(self, batches, loop, kind: str, step: int):
        self.batches, self.loop, self.kind, self.step = batches, loop, kind, step

    def next(self):
        if self.loop.state.step + 1 == self.step:
            if self.kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            while True:
                time.sleep(60)
        return self.batches.next()

    def __getattr__(self, name):
        return getattr(self.batches, name)


def _arm(kind: str, step: int) -> None:
    init = Loop.__init__

    def faulty_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.batches = _Faulty(self.batches, self, kind, step)

    Loop.__init__ = faulty_init


if __name__ == "__main__":
    kind, rank, step = os.environ["MYXTTS_TEST_FAULT"].split(":")
    if os.environ.get("RANK") == rank and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
        _arm(kind, int(step))
    sys.exit(main(sys.argv[1:]))
