"""``python -m tests.train.slow_rank RANK SECONDS ARGS...``: ``myxtts ARGS...`` as a user runs it,
except that rank RANK's loader sleeps SECONDS before each batch: a straggler made on purpose,
for the DDP tests (torchrun starts it on every rank)."""
import os
import sys
import time

from myxtts.cli import main
from myxtts.train.batches import Batches

if __name__ == "__main__":
    slow_rank, seconds = int(sys.argv[1]), float(sys.argv[2])
    if int(os.environ.get("RANK", "0")) == slow_rank:
        load = Batches.next

        def load_slowly(self):
            time.sleep(seconds)
            return load(self)

        Batches.next = load_slowly
    sys.exit(main(sys.argv[3:]))
