import os
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
LJSPEECH = FIXTURES / "ljspeech"
REFERENCE_VOICES = FIXTURES / "reference_voices"

os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture
def ljspeech_dir():
    return LJSPEECH


@pytest.fixture
def myxtts_cmd():
    """The command line as a user types it (the package's module entry point)."""
    return [sys.executable, "-m", "myxtts"]
