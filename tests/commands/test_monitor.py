import argparse
import os
import subprocess
from pathlib import Path

import pytest

from myxtts.commands import monitor
from myxtts.observe.gpu import GpuSampler, GpuUnavailable, read_csv
from myxtts.observe.monitor import plot_timeline
from tests.observe.fake_nvml import FakeNvml

ROOT = Path(__file__).resolve().parents[2]


def _nvml_works() -> bool:
    try:
        GpuSampler(nvml=None).start().stop()
        return True
    except GpuUnavailable:
        return False


def _parse(argv):
    parser = argparse.ArgumentParser(prog="myxtts")
    monitor.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["monitor", *argv])


@pytest.mark.skipif(_nvml_works(), reason="an NVIDIA GPU is present: the no-GPU path cannot be shown here")
def test_cli_without_gpu_exits_2_with_one_sentence(myxtts_cmd):
    r = subprocess.run([*myxtts_cmd, "monitor", "--duration", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    # Either no NVIDIA driver, or no nvidia-ml-py to talk to it: both are one sentence.
    assert lines[0].startswith("myxtts monitor: error: ") and lines[0].endswith(".")
    assert "no NVIDIA GPU" in lines[0] or "nvidia-ml-py is not installed" in lines[0]
    assert r.stdout == ""


def test_fake_gpu_run_prints_verdict_and_writes_csv_and_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nv = FakeNvml(utils=(95.0,))
    monkeypatch.setattr(monitor, "GpuSampler", lambda interval: GpuSampler(interval, nvml=nv))
    args = _parse(["--interval", "0.1", "--duration", "0.35", "--out", str(tmp_path / "g.csv"),
                   "--plot", str(tmp_path / "g.png")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "-> STEADY" in out and "verdict thresholds: idle: mean < 5 %" in out
    assert "SM active (GPM) mean 70.0 %" in out and "clock slowdowns: sw_power_cap 100 %" in out
    assert len(read_csv(tmp_path / "g.csv")) >= 2
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_matplotlib_skips_the_plot_with_a_reason(monkeypatch, tmp_path):
    import builtins
    real = builtins.__import__

    def no_mpl(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    from myxtts.observe.gpu import GpuSample
    why = plot_timeline([GpuSample(t=0.0, gpu=0, util=50.0)], tmp_path / "x.png")
    assert "matplotlib is not installed" in why and not (tmp_path / "x.png").exists()


def test_bad_arguments_are_user_errors():
    from myxtts.errors import UserError
    with pytest.raises(UserError, match="--interval"):
        monitor.run(_parse(["--interval", "0"]))
