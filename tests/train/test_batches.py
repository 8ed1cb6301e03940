"""The trainer's batches: rows and real frames come from the plan each batch was built from,
the global RNG is left alone, and a resumed stream hands out the same batches."""
import numpy as np
import pytest
import torch

from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.train.batches import Batches
from myxtts.train.distributed import DistInfo

from .conftest import FAST


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_count_the_plans_rows_and_frames_and_resume_exactly(lj_cache, workers):
    cfg = load("tiny", FAST + [f"data.num_workers={workers}"])
    cache = Cache(lj_cache)
    batches = Batches(cache, cfg, torch.device("cpu"), DistInfo())
    n = 2 * len(batches.sampler) + 1  # across two epoch boundaries
    torch.manual_seed(0)
    rng = torch.get_rng_state()
    got = [batches.next() for _ in range(n)]
    # Starting the loader draws a seed; the training run's randomness must not see it.
    assert torch.equal(torch.get_rng_state(), rng)
    for b in got:
        rows = b.tensors["index"].numpy()
        assert b.samples == len(rows) and b.frames == int(np.sum(cache.index.n_frames[rows]))
    resumed = Batches(cache, cfg, torch.device("cpu"), DistInfo())
    state = batches.state_dict()
    expected = [batches.next() for _ in range(3)]
    resumed.load_state_dict(state)
    for a, b in zip(expected, [resumed.next() for _ in range(3)]):
        assert (a.frames, a.samples) == (b.frames, b.samples)
        assert torch.equal(a.tensors["index"], b.tensors["index"]) and torch.equal(a.tensors["mel"], b.tensors["mel"])
