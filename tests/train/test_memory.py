"""Peak memory, defined once: the allocator's reserved peak as a share of capacity, with its
retries and OOMs beside it (train/memory.py)."""
import json

import torch

from myxtts.observe.measured import Measured, Settings
from myxtts.train.memory import GIB, DeviceMemory, read_memory, reset

CAPACITY = 80 * GIB
# The keys torch.cuda.memory_stats() returns (a selection of its ~80), as an H100 run left them.
STATS = {
    "active_bytes.all.current": 20 * GIB, "active_bytes.all.peak": 52 * GIB,
    "allocated_bytes.all.current": 20 * GIB, "allocated_bytes.all.peak": 50 * GIB,
    "reserved_bytes.all.current": 58 * GIB, "reserved_bytes.all.peak": 60 * GIB,
    "inactive_split_bytes.all.peak": 3 * GIB, "num_alloc_retries": 3, "num_ooms": 1,
    "num_sync_all_streams": 0, "num_device_alloc": 41, "num_device_free": 7,
}


def test_the_peak_is_the_reserved_peak_as_a_share_of_capacity_with_retries_and_ooms():
    m = DeviceMemory.from_stats(STATS, CAPACITY)
    assert m.reserved_peak_gib == 60.0 and m.reserved_peak_pct == 75.0 and m.capacity_gib == 80.0
    assert m.active_peak_gib == 52.0  # not the allocated peak, and not what "peak memory" means
    assert (m.alloc_retries, m.ooms) == (3, 1)
    assert m.text() == "peak memory 60.0 GiB (75 % of 80.0 GiB reserved by the allocator), 3 allocator retries, 1 OOMs"
    assert DeviceMemory.from_dict(json.loads(json.dumps(m.as_dict()))) == m  # JSON at the edge


def test_no_figures_without_an_allocator_to_ask():
    assert DeviceMemory.from_stats(None, CAPACITY) is None
    assert DeviceMemory.from_stats({}, CAPACITY) is None  # memory_stats() before CUDA's first allocation
    assert read_memory(torch.device("cpu")) is None
    reset(torch.device("cpu"))  # a no-op off CUDA, never an error


def test_a_run_summary_is_diagnosed_from_the_allocator_and_an_older_one_from_nvml():
    gpu = {"gpus": [{"mem_used_max_mib": 40 * 1024, "mem_total_mib": 80 * 1024}]}
    new = Measured.from_summary({"gpu": gpu, "memory": DeviceMemory.from_stats(STATS, CAPACITY).as_dict()},
                                Settings())
    assert new.mem_peak_pct == 75.0 and new.memory.alloc_retries == 3
    old = Measured.from_summary({"gpu": gpu, "peak_memory_gib": 30.0}, Settings())
    assert old.mem_peak_pct == 50.0 and old.memory is None
