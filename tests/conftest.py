import os

# One OpenMP thread per test process (set before torch is imported, which reads it): the suite
# runs one process per core (pytest -n auto), and two threads each on two cores made every
# process wait on OpenMP's spinning barriers. Measured on a 2-core VM, 2026-11-28: the whole
# suite 15:11 with one thread and a cold compile cache, 18:03 with two and a warm one. A test
# that needs another count sets it for its own subprocess (the learning guard's curve).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import signal  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _stop_signals_as_a_fresh_process_has_them():
    """Every test starts with Ctrl-C and SIGTERM as a freshly started command has them: Python's
    handler, nothing blocked. Code an earlier test ran in this process can leave SIGINT ignored
    (seen in the full suite: later subprocesses inherited it and ran through a Ctrl-C), and the
    tests of stopping cleanly must not depend on the order they run in."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    yield

FIXTURES = Path(__file__).parent / "fixtures"
LJSPEECH = FIXTURES / "ljspeech"
REFERENCE_VOICES = FIXTURES / "reference_voices"



@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module of toy-sized models: their matrices are too small to gain
    much from two, on a busy machine OpenMP's spinning barriers make two threads up to 10x slower
    (measured), and results are identical from run to run."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def ljspeech_dir():
    return LJSPEECH


@pytest.fixture
def myxtts_cmd():
    """The command line as a user types it (the package's module entry point)."""
    return [sys.executable, "-m", "myxtts"]


def kill_when(proc, path: Path, timeout_s: float = 300, poll_s: float = 0.05) -> None:
    """kill -9 ``proc`` once ``path`` exists (or it ended, or ``timeout_s`` passed): a crash at a
    chosen point of its work."""
    import time

    deadline = time.time() + timeout_s
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(poll_s)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
