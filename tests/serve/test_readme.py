"""The README's OpenAI SDK example, run as written against the served model."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np

from tests.serve.conftest import API_KEY, ROOT


def readme_example() -> str:
    section = (ROOT / "README.md").read_text().split("## Serving a voice", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


def test_the_readme_sdk_example_writes_streamed_pcm(served, tmp_path):
    code = readme_example().replace("http://127.0.0.1:8000/v1", f"{served.url}/v1").replace('"unused"', repr(API_KEY))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    wav = np.frombuffer((tmp_path / "hello.pcm").read_bytes(), dtype="<i2")
    assert wav.size > 24000 // 4 and np.abs(wav).max() > 30
