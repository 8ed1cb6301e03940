import base64
import dataclasses
import io
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import soundfile as sf

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from myxtts.observe.findings import Diagnosis, Finding
from myxtts.observe.gpu_summary import GpuSample, summarize_samples
from myxtts.observe.measured import Measured
from myxtts.observe.report import render, write_report

from . import synthetic_runs as runs

SECTIONS = ["findings", "learning", "alignment", "samples", "gpu-timeline",
            "step-time", "input-bound", "mfu", "padding", "recompiles", "throughput"]


class Sections(HTMLParser):
    """Collects each <section id>'s text and the external references anywhere in the page."""

    def __init__(self):
        super().__init__()
        self.text, self.current, self.svgs, self.external, self.media = {}, None, {}, [], {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.current = a["id"]
            self.text[self.current] = ""
        if tag == "svg" and self.current:
            self.svgs[self.current] = self.svgs.get(self.current, 0) + 1
        if tag in ("img", "audio") and self.current:
            self.media.setdefault(self.current, []).append(a.get("src", ""))
        for k in ("src", "href"):
            if a.get(k) and not a[k].startswith("data:"):  # inline data is part of the page
                self.external.append(a[k])
        if tag == "link" or tag == "script":
            self.external.append(tag)

    def handle_endtag(self, tag):
        if tag == "section":
            self.current = None

    def handle_data(self, data):
        if self.current:
            self.text[self.current] += data


def learned(folder: Path) -> dict:
    """A run's learning as the report reads it: metrics.jsonl records (training lines with their
    terms, validation lines, an evaluation line) and samples/step-N/ with audio and an alignment."""
    records = [{"step": s, "loss": 5.0 / s, "mel_l1": 2.0 / s, "duration": 1.0 / s, "lr": 1e-3, "grad_norm": 3.0,
                "step_ms": 100.0} for s in range(1, 21)]
    records += [{"step": s, "loss": None, "val_loss": 6.0 / s, "val_mel_l1": 2.5 / s, "val_duration": 1.2 / s}
                for s in (10, 20)]
    records.append({"step": 20, "loss": None, "eval_wer": 0.5})
    rng = np.random.default_rng(0)
    for step in (10, 20):
        d = folder / "samples" / f"step-{step:08d}"
        d.mkdir(parents=True)
        sf.write(d / "sample.wav", 0.3 * np.sin(np.arange(22050) / 10.0).astype(np.float32), 22050)
        (d / "vocoder.txt").write_text("griffin-lim\n")
        plt.imsave(d / "attention.png", rng.random((20, 40)))
    return {"metrics": records, "samples": folder / "samples"}


def full_run():
    """A measured run and the page extras for it."""
    m = runs.input_bound()[0]
    rng = [30.0 + (i % 7) - 3 for i in range(240)]
    samples = [GpuSample(t=i * 0.5, gpu=0, util=u, sm_active=u * 0.7) for i, u in enumerate(rng)]
    m = dataclasses.replace(
        m, gpu=summarize_samples(samples, 0.5, {0: ("Fake H100", "")}), mfu_pct=12.5,
        throughput={"frames_per_s": 52000.0, "audio_s_per_s": 603.7, "samples_per_s": 71.0},
        step_ms=118.0, step_cov_pct=4.0, compile_s=42.0)
    page = dict(title="tiny on Fake H100 <test>", meta={"config": "configs/tiny.yaml", "steps": 300},
                gpu_samples=samples, mfu_basis="H100 SXM dense bf16 989 TFLOP/s", achieved_tflops=123.6)
    return m, page


def parse(html):
    p = Sections()
    p.feed(html)
    return p


def test_every_section_is_present_with_a_plot_where_data_exists(tmp_path):
    m, page = full_run()
    p = parse(render(m, **page, **learned(tmp_path)))
    assert list(p.text) == SECTIONS
    for sid in ("gpu-timeline", "step-time", "input-bound", "mfu", "padding"):
        assert p.svgs.get(sid), sid
    # one chart per loss term, the total first, training and validation each; not lr or grad_norm
    assert p.svgs["learning"] == 3 and p.text["learning"].startswith("Loss per term (training and validation)loss")
    assert "validation mel_l1 0.125 at step 20" in p.text["learning"] and "grad_norm" not in p.text["learning"]
    (img,) = p.media["alignment"]
    assert img.startswith("data:image/png;base64,iVBORw0K") and "Step 20" in p.text["alignment"]
    assert len(p.media["samples"]) == 2 and "1.00 s" in p.text["samples"]
    for src in p.media["samples"]:  # each plays the sample: a second of sound
        wav, sr = sf.read(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), dtype="float32")
        assert src.startswith("data:audio/flac;base64,") and wav.size == sr and np.abs(wav).max() > 0.2
    assert "not measured" not in "".join(p.text.values())
    assert "data.num_workers=6" in p.text["findings"]
    assert "starved" in p.text["gpu-timeline"] and "52,000.0" in p.text["throughput"]
    assert "Warm-up (compiling the step): 42.0 s" in p.text["step-time"]
    assert "step (host + GPU) 44.0 %" in p.text["input-bound"]
    assert p.external == []  # self-contained: no CDN, no linked files


def test_missing_data_says_not_measured_with_the_reason():
    html = render(Measured(not_measured={"gpu-timeline": "no NVIDIA GPU on this machine"}))
    p = parse(html)
    assert list(p.text) == SECTIONS
    assert "not measured (no NVIDIA GPU on this machine)" in p.text["gpu-timeline"]
    for sid in SECTIONS[2:]:
        assert re.search(r"not measured \(.+\)", p.text[sid]), sid
    assert not p.svgs


def test_text_is_escaped(tmp_path):
    m, page = full_run()
    path = write_report(tmp_path / "r" / "report.html", m, **page)
    html = path.read_text()
    assert "&lt;test&gt;" in html and "<test>" not in html


def test_precomputed_findings_are_used_as_given():
    html = render(Measured(), Diagnosis("input-bound", "given", [Finding("high", "T", "E", "`data.num_workers=9`")]))
    assert "<code>data.num_workers=9</code>" in html and "given" in html


@pytest.mark.skipif(not shutil.which("chromium"), reason="chromium is not installed")
def test_renders_in_headless_chromium(tmp_path):
    m, extra = full_run()
    page = write_report(tmp_path / "report.html", m, **extra, **learned(tmp_path))
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1000,2400", page.as_uri()],
                   capture_output=True, timeout=60)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a blank page compresses to a few KB


def test_statistics_without_their_samples_are_shown_without_a_plot():
    p = parse(render(Measured(gpu=runs.gpu_summary([30.0, 31.0, 29.0, 30.0]))))
    assert "not measured (no GPU samples were recorded)" in p.text["gpu-timeline"]
    assert "starved" in p.text["gpu-timeline"] and not p.svgs
