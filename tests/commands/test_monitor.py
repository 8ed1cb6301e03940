"""`myxtts monitor` on a fake NVML: summary, verdict, CSV and timeline. The real command line on
this machine (exit 2 and one sentence without a GPU) runs in test_every_command.py."""
import argparse

import pytest

from myxtts.commands import monitor
from myxtts.observe.gpu import GpuSampler
from myxtts.observe.gpu_summary import read_csv
from tests.observe.fake_nvml import FakeNvml


def _parse(argv):
    parser = argparse.ArgumentParser(prog="myxtts")
    monitor.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["monitor", *argv])


def test_fake_gpu_run_prints_verdict_and_writes_csv_and_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nv = FakeNvml(utils=(95.0,))
    monkeypatch.setattr(monitor, "GpuSampler", lambda interval: GpuSampler(interval, nvml=nv))
    args = _parse(["--interval", "0.1", "--duration", "0.35", "--out", str(tmp_path / "g.csv"),
                   "--plot", str(tmp_path / "g.svg")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "-> STEADY" in out and "verdict thresholds: idle: mean < 5 %" in out
    assert "SM active (GPM) mean 70.0 %" in out and "clock slowdowns: sw_power_cap 100 %" in out
    assert len(read_csv(tmp_path / "g.csv")) >= 2
    chart = (tmp_path / "g.svg").read_text()
    assert chart.startswith("<svg") and "gpu0 utilization.gpu" in chart and "gpu0 SM active (GPM)" in chart
    assert chart.count("<polyline") == 2  # utilisation and SM activity, one line each


def test_bad_arguments_are_user_errors():
    from myxtts.errors import UserError
    with pytest.raises(UserError, match="--interval"):
        monitor.run(_parse(["--interval", "0"]))
