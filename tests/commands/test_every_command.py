"""Every command the README documents, run once as a user runs it: a subprocess of the real
command line, on one toy cache and one run trained a few steps, both made by the commands
themselves and shared by every row. A row passes when the command exits with its documented
code and prints no traceback, and what it wrote says what it should (a wav with sound in it,
a JSON record with its fields). Where the machine lacks what a command needs (`monitor` without
an NVIDIA GPU, `eval` without its extra), the documented answer is exit 2 and one line.

The README's command table is the list: a command it names that has no row here fails, and so
does a row for a command it no longer names. Every `myxtts ...` line in README.md and
docs/design.md must name a command (and action or mode) the parser knows, and the example lines
of the README's code blocks must parse as written: a renamed command or option fails here.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import yaml

from myxtts.cli import build_parser, parse
from myxtts.config import load
from myxtts.infer import SILENT_DBFS, dbfs
from myxtts.rundir import RunDir
from tests.evaluate.conftest import TINY
from tests.train.conftest import LJ, ROOT

README = ROOT / "README.md"
DOCS = [README, ROOT / "docs" / "design.md"]
VOICE = ROOT / "tests" / "fixtures" / "reference_voices" / "arctic_a0007_male.wav"
HELD_OUT = ["LJ001-0002", "LJ001-0008"]  # the two shortest clips: cheap to synthesize and score
SAMPLE_RATE = load("tiny").audio.sample_rate


# ------------------------------------------------------------------ what the docs name

def _code(markdown: str) -> tuple[list[str], list[str]]:
    """The lines of the fenced code blocks (a line ending in a backslash joined to the next, as
    the shell joins them), and the inline code spans outside them (a span may wrap across lines:
    its whitespace is collapsed)."""
    fence = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
    lines = [line for block in fence.findall(markdown) for line in block.replace("\\\n", " ").splitlines()]
    spans = [" ".join(s.split()) for s in re.findall(r"`([^`\n]+(?:\n[^`\n]+)*)`", fence.sub("", markdown))]
    return lines, spans


def _command_words(code: str) -> list[str] | None:
    """The words after `myxtts` (also `.venv/bin/myxtts`) when ``code`` is a command line."""
    m = re.match(r"^(?:\S*/)?myxtts\s+(.+)$", code.strip())
    return m.group(1).split() if m else None


def _subparsers(parser) -> dict:
    return next((a.choices for a in parser._actions if isinstance(getattr(a, "choices", None), dict)), {})


def _resolve(words: list[str]) -> list[str]:
    """``words`` of a documented line → the command names it documents ("cache verify",
    "bench loader" and "bench train" for ``bench loader\\|train``); raises AssertionError naming
    a word the parser does not know."""
    parser = build_parser()
    first = words[0]
    if first.startswith("-"):
        assert first in parser._option_string_actions, f"myxtts {first}: no such option"
        return []
    commands = _subparsers(parser)
    assert first in commands, f"myxtts {first}: no such command (the CLI has {', '.join(commands)})"
    actions = _subparsers(commands[first])
    if not actions:
        return [first]
    if len(words) < 2 or words[1].startswith(("-", "[")):
        return [first]
    named = re.split(r"\\?\|", words[1])
    for name in named:
        assert name in actions, f"myxtts {first} {name}: no such action (it has {', '.join(actions)})"
    return [f"{first} {name}" for name in named]


def documented_lines(path: Path) -> list[str]:
    lines, spans = _code(path.read_text(encoding="utf-8"))
    return [c.strip() for c in lines + spans if _command_words(c)]


def commands_table(markdown: str) -> str:
    """The README's section "## Commands", its table of commands."""
    return markdown.split("\n## Commands", 1)[1].split("\n## ", 1)[0]


def table_commands(markdown: str) -> list[str]:
    """The commands of the README's table under "## Commands": the code spans of each row's
    first cell (`myxtts monitor`, `profile`, ... name one command each)."""
    names = []
    for row in commands_table(markdown).splitlines():
        if not row.startswith("| `"):
            continue
        first_cell = re.split(r"(?<!\\)\|", row)[1]
        for span in re.findall(r"`([^`]+)`", first_cell):
            names += _resolve(_command_words(span) or span.split())
    return names


# A row's variants that run as rows of their own, where the table names them: the train row's
# second stage ("`--stage vocoder` for the vocoder", run right after the first, whose cache it
# shares) and the demo's other corpus.
VARIANTS = {"train": ["--stage vocoder"], "demo": ["--language fa"]}
TABLE = commands_table(README.read_text(encoding="utf-8"))
DOCUMENTED = [c for name in table_commands(README.read_text(encoding="utf-8")) for c in
              [name, *(f"{name} {v}" for v in VARIANTS.get(name, []) if v in TABLE)]]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_documented_command_line_names_a_command_the_cli_knows(doc):
    lines = documented_lines(doc)
    assert lines, doc
    for line in lines:
        _resolve(_command_words(line))


def test_the_readme_examples_parse_as_written():
    """The lines written to be typed (code blocks, and spans spelt `.venv/bin/myxtts ...`) hold
    no placeholders: they must parse, every option known and every required one given."""
    lines, spans = _code(README.read_text(encoding="utf-8"))
    typed = [c for c in lines + [s for s in spans if s.startswith(".venv/bin/myxtts ")] if _command_words(c)]
    assert len(typed) >= 6  # prepare, train, synthesize, eval twice, demo
    for line in typed:
        argv = shlex.split(line, comments=True)[1:]
        args = parse(build_parser(), argv)  # argparse exits 2 on an unknown or missing option
        assert args.func, line


def test_the_readme_table_lists_every_command_of_the_cli():
    from myxtts.cli import COMMANDS

    assert {c.split()[0] for c in DOCUMENTED} == set(COMMANDS)


# ------------------------------------------------------------------------ how a run is judged

# One intra-op thread, as in tests/models: toy matrices gain little from two, and on a busy
# machine OpenMP's spinning barriers made two threads' steps 15-40x slower (measured, 2 cores).
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def myxtts(*argv) -> subprocess.CompletedProcess:
    """`myxtts ARGV` as a user runs it: the package's entry point, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "myxtts", *map(str, argv)], capture_output=True,
                          text=True, cwd=ROOT, env=ENV, timeout=600)


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, r.stderr[-4000:]
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-4000:]
    return r


def one_line_error(r: subprocess.CompletedProcess, command: str) -> str:
    """Exit 2 and one sentence on stderr, nothing else (docs/design.md, "Exit codes")."""
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr, r.stderr[-4000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"myxtts {command}: error: "), r.stderr
    assert r.stdout == ""
    return lines[0]


def has_sound(wav: Path) -> np.ndarray:
    audio, sr = sf.read(wav, dtype="float32")
    assert sr == SAMPLE_RATE and audio.ndim == 1 and audio.size > sr // 10, (sr, audio.shape)
    assert np.isfinite(audio).all() and dbfs(float(np.abs(audio).max())) > SILENT_DBFS
    return audio


def losses(run: Path) -> dict[int, float]:
    rows = RunDir(run).read_metrics()
    return {r["step"]: r["loss"] for r in rows if r.get("loss") is not None}


# ---------------------------------------------------------------------------- shared inputs

# Toy sizes, as tests/evaluate trains: the tiny preset's model shrunk further, 2 bucket shapes,
# no compile, no loader workers, a low decoder cap.
TOY = TINY
# The vocoder's discriminators make even one step take seconds: one step on short segments.
VOCODER = ["train.log_every=1", "data.num_workers=0", "vocoder.segment_frames=16", "data.max_batch_size=2"]


class World:
    """The inputs the rows share, each made once, on first use, by the command under test."""

    def __init__(self, root: Path):
        self.root = root

    @cached_property
    def prepared(self) -> subprocess.CompletedProcess:
        corpus = self.root / "lj"
        shutil.copytree(LJ, corpus)
        (corpus / "val.txt").write_text("\n".join(HELD_OUT) + "\n")
        # One worker: the work is done in this process, without a worker's seconds of start-up.
        return myxtts("prepare", corpus, "--out", self.root / "cache", "--config", "tiny", "--workers", "1")

    @cached_property
    def cache(self) -> Path:
        ok(self.prepared)
        return self.root / "cache"

    @cached_property
    def trained(self) -> subprocess.CompletedProcess:
        # a sample at the last step: the report's alignment and audio
        return myxtts("train", "--config", "tiny", "--data", self.cache, "--out", self.root / "run",
                      "--no-progress", *TOY, "train.max_steps=2", "train.sample_every=2")

    @cached_property
    def run(self) -> Path:
        ok(self.trained)
        return self.root / "run"

    @cached_property
    def vocoder_trained(self) -> subprocess.CompletedProcess:
        """The run's own vocoder, in RUN/vocoder, where synthesis finds it unasked."""
        return myxtts("train", "--stage", "vocoder", "--config", "tiny", "--data", self.cache, "--out",
                      self.run / "vocoder", "--no-progress", *VOCODER, "train.max_steps=1")

    @cached_property
    def vocoder(self) -> Path:
        ok(self.vocoder_trained)
        return self.run / "vocoder"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("every-command"))


# ------------------------------------------------------------------------------------ rows

# A command as the README names it → its run: make what it needs, run it, check what it wrote.
RUNS: dict[str, Callable[[World, Path], None]] = {}


def row(command: str):
    def register(fn):
        RUNS[command] = fn
        return fn
    return register


@row("prepare")
def _prepare(w: World, tmp: Path) -> None:
    r = ok(w.prepared)
    report = json.loads((w.cache / "report.json").read_text())
    assert report["utterances"] == 8 and report["val_utterances"] == 2 and report["skipped"] == []
    assert "prepared 8 utterances" in r.stdout and "2 held out" in r.stdout


@row("cache verify")
def _cache_verify(w: World, tmp: Path) -> None:
    r = ok(myxtts("cache", "verify", w.cache))
    assert r.stdout.strip() == f"{w.cache}: OK"


@row("train")
def _train(w: World, tmp: Path) -> None:
    r = ok(w.trained)
    assert sorted(losses(w.run)) == [1, 2] and all(map(math.isfinite, losses(w.run).values()))
    summary = json.loads((w.run / "summary.json").read_text())
    assert summary["steps"] == 2 and not summary["stopped"] and summary["stage"] == "acoustic"
    # MFU in every run: on a CPU not applicable, or nothing timed after warm-up, and said so
    assert summary["mfu_pct"] is None and summary["mfu_basis"] and "mfu_by_shape" in summary
    assert (w.run / "checkpoints" / "step-00000002" / "model.safetensors").is_file()
    assert "step 2/2" in r.stderr
    # the report shows learning: the loss per term with validation, the alignment, the sample
    report = (w.run / "report.html").read_text()
    assert f"<title>MyXTTS report: {w.run}</title>" in report
    learning = report.split('<section id="learning">', 1)[1].split("</section>", 1)[0]
    assert learning.count("<svg") >= 3 and "validation mel_l1" in learning and "not measured" not in learning
    assert 'src="data:image/png;base64,' in report.split('<section id="alignment">', 1)[1].split("</section>")[0]
    assert 'src="data:audio/flac;base64,' in report.split('<section id="samples">', 1)[1].split("</section>")[0]


@row("train --stage vocoder")
def _train_vocoder(w: World, tmp: Path) -> None:
    r = ok(w.vocoder_trained)
    assert "vocoder: 2.79 M parameters" in r.stderr
    assert list(losses(w.vocoder)) == [1] and math.isfinite(losses(w.vocoder)[1])
    assert json.loads((w.vocoder / "summary.json").read_text())["stage"] == "vocoder"
    assert (w.vocoder / "checkpoints" / "step-00000001" / "model.safetensors").is_file()


@row("synthesize")
def _synthesize(w: World, tmp: Path) -> None:
    out = tmp / "hello.wav"
    assert w.vocoder.is_dir()  # RUN/vocoder: used without being named
    r = ok(myxtts("synthesize", "--checkpoint", w.run, "--text", "Hello there.", "--reference", VOICE,
                  "--language", "en-us", "--out", out))
    has_sound(out)
    assert "Griffin-Lim" not in r.stderr and f"vocoder: {w.vocoder}" in r.stderr  # it says which
    assert f"{out}  " in r.stdout and "1 text(s)" in r.stdout and f"voice: {VOICE}" in r.stdout
    assert "language: en-us" in r.stdout


@row("serve")
def _serve(w: World, tmp: Path) -> None:
    import signal
    import time

    import httpx

    from tests.serve.conftest import free_port

    assert w.vocoder.is_dir()  # RUN/vocoder: used without being named
    port = free_port()
    log = tmp / "serve.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "myxtts", "serve", "--checkpoint", str(w.run), "--port",
                                 str(port)], stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=ENV)
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None and time.time() < deadline, log.read_text()
            try:
                httpx.get(f"http://127.0.0.1:{port}/health")
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", timeout=60, json={
            "model": "myxtts", "input": "Hello there.", "voice": "neutral", "response_format": "wav"})
        assert r.status_code == 200, r.text
        (tmp / "hello.wav").write_bytes(r.content)
        has_sound(tmp / "hello.wav")
        # a voice from a clip, without --voices: kept in a folder of the server's own until it stops
        r = httpx.post(f"http://127.0.0.1:{port}/v1/audio/voices", timeout=60, files=[
            ("name", (None, "mine")), ("audio_sample", ("clip.wav", VOICE.read_bytes(), "audio/wav"))])
        assert r.status_code == 201, r.text
        (uploads,) = re.findall(r"uploaded voices go to (\S+) until the server stops", log.read_text())
        assert (Path(uploads) / "mine").is_dir()
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: how a server is stopped
        code = proc.wait(timeout=30)
    text = log.read_text()
    assert code == 0 and "Traceback" not in text, text
    assert f"vocoder: {w.vocoder}" in text and "done: voice neutral, 12 characters" in text
    assert not Path(uploads).exists()  # gone with the server


@row("bench serve")
def _bench_serve(w: World, tmp: Path) -> None:
    js = tmp / "serve.json"
    ok(myxtts("bench", "serve", "--checkpoint", w.run, "--clients", "1,2", "--requests", "1", "--rounds", "1",
              "--json", js))
    rows = json.loads(js.read_text())["rows"]
    assert [(r["batching"], r["clients"]) for r in rows] == [("on", 1), ("off", 1), ("on", 2), ("off", 2)]
    assert all(r["requests"] == r["clients"] for r in rows)
    assert all(r["failed"] == 0 and r["audio_s_per_s"] > 0 and r["first_audio_p50_ms"] > 0 for r in rows)


@row("export")
def _export(w: World, tmp: Path) -> None:
    """The run as a Piper voice: its cache's speaker, a clone of VOICE (the clips of its folder)
    and the neutral voice, then Piper's own command speaking the clone, about as long as
    `synthesize` says it."""
    voice = tmp / "voices" / "lj.onnx"
    assert w.vocoder.is_dir()  # RUN/vocoder: carried without being named
    r = ok(myxtts("export", "--checkpoint", w.run, "--format", "piper", "--data", w.cache,
                  "--voice", f"male={VOICE.parent}", "--out", voice))
    config = json.loads(voice.with_name("lj.onnx.json").read_text(encoding="utf-8"))
    assert config["speaker_id_map"] == {"speaker": 0, "male": 1, "neutral": 2}  # the voices serve lists
    assert config["audio"]["sample_rate"] == SAMPLE_RATE
    assert f"vocoder: {w.vocoder}" in r.stderr and "phoneme map coverage: 100.0 %" in r.stderr
    assert f"{voice}\n" in r.stdout and "3 voice(s)" in r.stdout
    pytest.importorskip("piper")  # piper-tts (GPL-3.0): a test dependency, `make test` installs it
    said = tmp / "piper.wav"
    p = subprocess.run([sys.executable, "-m", "piper", "-m", str(voice), "-s", "1", "-f", str(said)],
                       input="Hello.\n", capture_output=True, text=True, cwd=tmp, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    heard, rate = sf.read(said, dtype="float32")
    assert rate == SAMPLE_RATE and heard.ndim == 1 and np.isfinite(heard).all()
    assert np.sqrt(np.mean(heard.astype(np.float64) ** 2)) > 0.01  # Piper scales each sentence to full range
    # The weights it says it took (the run's best, which `synthesize RUN` does not pick), on a text
    # short enough that the toy decoder cap does not split it into sentences joined by pauses.
    weights = re.search(r"^weights: (.+?): ", r.stderr, re.M).group(1)
    ours = tmp / "ours.wav"
    ok(myxtts("synthesize", "--checkpoint", weights, "--text", "Hello.", "--reference", VOICE, "--out", ours))
    frames = sf.info(str(ours)).frames
    assert abs(heard.size / frames - 1) < 0.1, (heard.size, frames)


@row("eval")
def _eval(w: World, tmp: Path) -> None:
    from myxtts.evaluate import INSTALL_HINT, missing
    from myxtts.evaluate.evaluation import FIGURES

    out = tmp / "eval"
    # Griffin-Lim asked for by name: the vocoder in RUN/vocoder trained one step only
    r = myxtts("eval", "--checkpoint", w.run, "--data", w.cache, "--out", out, "--limit", "1",
               "--vocoder", "griffin-lim")
    if missing():  # documented: without the eval extra it says what to install
        assert INSTALL_HINT in one_line_error(r, "eval")
        return
    ok(r)
    report = json.loads((out / "eval.json").read_text())
    assert report["sentences"] == 1 and report["step"] == 2 and report["vocoder"] == "griffin-lim"
    for key in FIGURES:
        assert key in report
    # single speaker: the mismatched-voice figure is missing, and says why
    assert report["speaker_cosine_mismatched"] is None
    assert "one speaker" in report["not_measured"]["speaker_cosine_mismatched"]
    # the recordings are understood; two steps of training are not
    assert report["wer_ground_truth"] <= 0.25 and report["wer_copy_synthesis"] <= 0.5
    assert report["wer"] >= 0.9
    assert 0.0 <= report["stopped_share"] <= 1.0 and report["duration_ratio"] > 0 and report["rtf"] > 0
    (sentence,) = report["per_sentence"]
    assert sentence["id"] == HELD_OUT[0] and sentence["reference"] != sentence["id"]
    assert sentence["transcript_ground_truth"].lower().startswith("in being comparatively modern")
    html = (out / "eval.html").read_text()
    for key in ("wav", "wav_ground_truth", "wav_copy_synthesis"):
        assert (out / sentence[key]).stat().st_size > 1000
        assert f'src="{sentence[key]}"' in html
    assert html.count("<audio") == 3 and "data:image/png;base64," in html
    assert "WER, synthesized" in r.stdout
    assert report["languages"] == ["en-us"] and sentence["language"] == "en-us" and "by_language" not in report


@row("bench loader")
def _bench_loader(w: World, tmp: Path) -> None:
    js = tmp / "loader.json"
    r = ok(myxtts("bench", "loader", "--config", "tiny", "--data", w.cache, "--quick", "--json", js))
    b = json.loads(js.read_text())
    assert b["quick"] and b["cache"] == str(w.cache) and b["corpus"]["train_utterances"] == 6
    ld = b["loader"]
    for loader in (ld["naive"], ld["cached"]):
        assert loader["frames_per_s"] > 0 and loader["batches"] > 0
    assert ld["cached"]["speedup"] > 0 and 0 <= ld["cached"]["input_bound_pct"] <= 100
    assert ld["shapes"] and 0 <= ld["padding_pct"] < 100 and ld["padding_by_pad_multiple"]
    assert b["simulated_step"]["mean_ms"] > 0
    assert set(b["targets"]) == {"cached_vs_naive_ge_20x", "input_bound_lt_1pct", "padding_le_10pct"}
    assert "input-bound:" in r.stdout and "targets:" in r.stdout


# Each mode sets its own compile setting.
BENCH_TOY = [s for s in TOY if s != "train.compile=off"]


@row("bench train")
def _bench_train(w: World, tmp: Path) -> None:
    js = tmp / "train.json"
    r = ok(myxtts("bench", "train", "--config", "tiny", "--data", w.cache, "--quick", "--steps", "1",
                  "--modes", "eager_fp32", "--json", js, *BENCH_TOY))
    b = json.loads(js.read_text())
    assert b["quick"] and b["steps"] == 1 and b["shapes"] and b["modes_pending"] == []
    eager = b["train"]["eager_fp32"]
    assert not eager["skipped"] and eager["steps"] == 1 and math.isfinite(eager["loss"])
    assert eager["frames_per_s"] > 0 and eager["step_ms"] > 0 and eager["ops_per_step"] > 100
    for mode in ("eager_amp", "compiled", "compiled_cudagraphs", "compiled_regional"):
        assert b["train"][mode]["skipped"] and "--modes" in b["train"][mode]["reason"]
    assert "eager_fp32" in r.stdout


@row("monitor")
def _monitor(w: World, tmp: Path) -> None:
    from myxtts.observe.gpu import start_sampler

    sampler, _ = start_sampler(0.5)  # can this machine's GPUs be sampled at all?
    if sampler is not None:
        sampler.stop()
    r = myxtts("monitor", "--duration", "1", "--interval", "0.2", "--out", tmp / "gpu.csv")
    if sampler is None:  # documented: without a GPU (or nvidia-ml-py) it says why and exits 2
        line = one_line_error(r, "monitor")
        assert "no NVIDIA GPU" in line or "nvidia-ml-py is not installed" in line
        assert line.endswith(".")
        assert not (tmp / "gpu.csv").exists()
        return
    ok(r)
    assert "GPU summary over" in r.stdout and "verdict thresholds:" in r.stdout
    assert len((tmp / "gpu.csv").read_text().splitlines()) >= 2


@row("profile")
def _profile(w: World, tmp: Path) -> None:
    out, js = tmp / "profile", tmp / "profile.json"
    r = ok(myxtts("profile", "--config", "tiny", "--data", w.cache, "--steps", "1", "--out", out,
                  "--json", js, *TOY))
    p = json.loads(js.read_text())
    assert p["steps"] == 1 and p["step_ms"] > 0 and p["breakdown"] and p["top"]
    assert p["diagnosis"]["headline"] and p["trace"] == str(out / "trace.json")
    assert json.loads((out / "trace.json").read_text())["traceEvents"]
    assert (out / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert "where a step's time goes" in r.stdout and "verdict: " in r.stdout


@row("doctor")
def _doctor(w: World, tmp: Path) -> None:
    r = ok(myxtts("doctor", "--config", "tiny", "--data", w.cache, *TOY))
    for section in ("environment", "configuration", "tests"):
        assert f"\n{section}\n" in f"\n{r.stdout}"
    for check in ("torch", "CPU", "buckets", "step test", "loader test", "cache disk"):
        assert f" {check} " in r.stdout
    assert re.search(r"^  ok +step test", r.stdout, re.M), r.stdout
    assert "findings" in r.stdout


@row("tune")
def _tune(w: World, tmp: Path) -> None:
    overlay = tmp / "tuned.yaml"
    r = ok(myxtts("tune", "--config", "tiny", "--data", w.cache, "--out", overlay, *TOY))
    decided = yaml.safe_load(overlay.read_text())["data"]
    merged = overlay.with_name("tuned.merged.yaml")
    assert load(merged).data.num_workers == decided["num_workers"] == load(overlay).data.num_workers
    assert f"myxtts train --config {merged} --data {w.cache}" in r.stdout


@row("demo")
def _demo(w: World, tmp: Path) -> None:
    out = tmp / "demo"
    r = ok(myxtts("demo", "--steps", "1", "--vocoder-minutes", "0.01", "--out", out))
    has_sound(out / "demo.wav")
    assert set(json.loads((out / "demo_timings.json").read_text())) == {"prepare", "train", "vocoder", "synthesize"}
    assert (out / "run" / "vocoder" / "summary.json").is_file()
    assert f"audio through {out / 'run' / 'vocoder'}" in r.stdout  # demo.wav went through it
    assert (out / "run" / "checkpoints" / "step-00000001").is_dir() and (out / "cache" / "meta.json").is_file()
    assert "where the time went (whole demo)" in r.stdout and f"wrote {out / 'demo.wav'}" in r.stdout


@row("demo --language fa")
def _demo_fa(w: World, tmp: Path) -> None:
    out = tmp / "demo"
    r = ok(myxtts("demo", "--language", "fa", "--steps", "1", "--out", out))
    has_sound(out / "demo.wav")
    assert set(json.loads((out / "demo_timings.json").read_text())) == {"prepare", "train", "synthesize"}
    assert "300 utterances" in r.stdout + r.stderr and "reference voice: spk2-" in r.stdout
    assert yaml.safe_load((out / "run" / "config.yaml").read_text())["text"]["language"] == "fa"


def test_every_documented_command_has_a_run_here():
    assert sorted(RUNS) == sorted(DOCUMENTED)


@pytest.mark.parametrize("command", DOCUMENTED)
def test_every_documented_command_runs(command, world, tmp_path):
    assert command in RUNS, f"`myxtts {command}` is documented in README.md but never run here"
    RUNS[command](world, tmp_path)
