"""One run with two training speakers, spoken three ways with no ``--data`` anywhere: ``myxtts
serve`` (its HTTP app, over loopback), ``myxtts synthesize`` and the Piper voice ``myxtts export``
writes. Each lists the same voices (the speakers of the cache the run recorded when its training
started, then ``neutral``, in that order), and a training voice called by name is the same voice
in all three: the eval extra's speaker encoder hears each pair at a cosine of 0.99 or more, and
the audio is the same to a 16-bit step.

The cosine alone cannot tell this run's voices apart: the model is untrained (a run trained 2
steps at the tiny preset's rate no longer hears its reference at all: its two speakers' mels came
out 6e-5 apart, and the encoder heard them at a cosine of 1.0), and the other training speaker
on the same text reads 0.999 (measured). So the control is the audio: the other speaker's is of
another length, where the three ways to say one voice agree sample for sample.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
import torch

from myxtts.cli import main
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import prepare
from myxtts.models.checkpoint import save_model
from myxtts.models.vocoder import build_generator
from myxtts.models.xtts import XTTS
from myxtts.rundir import RunDir
from tests.serve.conftest import free_port
from tests.train.conftest import LJ, ROOT

SPEAKERS = ["anna", "ben"]
TEXT = "In being comparatively modern."
CLIP = ROOT / "tests" / "fixtures" / "reference_voices" / "arctic_a0007_male.wav"
SAME_VOICE = 0.99  # speaker-encoder cosine: the same voice
SAME_AUDIO = 1e-4  # largest sample difference: the same audio (16-bit wav steps are 3e-5)
SAMPLE_RATE = load("tiny").audio.sample_rate


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    pass


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The LJSpeech clips as two speakers taking turns (two clips held out), and a run of the tiny
    model and a vocoder on their vocabulary, untrained (seeded), that records the cache as a
    run's training does when it starts: a model trained a few steps no longer hears its
    reference (see the module docstring)."""
    root = tmp_path_factory.mktemp("voices")
    corpus = root / "corpus"
    shutil.copytree(LJ, corpus)
    rows = (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines()
    (corpus / "metadata.csv").write_text("".join(f"{r}|{SPEAKERS[k % 2]}\n" for k, r in enumerate(rows)),
                                         encoding="utf-8")
    (corpus / "val.txt").write_text("LJ001-0002\nLJ001-0008\n")
    cfg = load("tiny")
    prepare(corpus, root / "cache", cfg, progress=False)
    vocab = Cache(root / "cache").vocab
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(vocab), cfg.audio.n_mels)
    with torch.no_grad():  # durations of a few frames a token, so the speech has some length
        model.decoder.duration.out.bias.fill_(1.5)
    run = root / "run"
    save_model(run / "checkpoints" / "step-00000003" / "model.safetensors", model, cfg, vocab.symbols, step=3)
    save_model(run / "vocoder" / "model.safetensors", build_generator(cfg), cfg, vocab.symbols, kind="vocoder")
    RunDir(run).record_cache(root / "cache")
    return run


@pytest.fixture(scope="module")
def server(run, tmp_path_factory):
    """``myxtts serve --checkpoint RUN`` as a user starts it, in a process of its own; its URL
    once it answers (it loads while the export below is written)."""
    port, log = free_port(), tmp_path_factory.mktemp("serve") / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "MYXTTS_API_KEY"}
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "myxtts", "serve", "--checkpoint", str(run), "--port",
                                 str(port)], stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    yield proc, f"http://127.0.0.1:{port}", log
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0 and "Traceback" not in log.read_text(), log.read_text()


@pytest.fixture(scope="module")
def exported(run, server, tmp_path_factory) -> Path:
    """``myxtts export --checkpoint RUN --format piper --out lj.onnx``: its .onnx.json."""
    onnx = tmp_path_factory.mktemp("export") / "lj.onnx"
    assert main(["export", "--checkpoint", str(run), "--format", "piper", "--out", str(onnx)]) == 0
    return onnx.with_name("lj.onnx.json")


@pytest.fixture(scope="module")
def served(server, exported) -> str:
    proc, url, log = server
    deadline = time.time() + 120
    while True:
        assert proc.poll() is None and time.time() < deadline, log.read_text()
        try:
            if httpx.get(f"{url}/health", timeout=10).json()["status"] == "ok":
                return url
        except httpx.HTTPError:
            time.sleep(0.2)


def speaker_ids(config: Path) -> dict[str, int]:
    return json.loads(config.read_text(encoding="utf-8"))["speaker_id_map"]


def test_serve_synthesize_and_export_list_the_same_voices(run, served, exported, capsys):
    listed = httpx.get(f"{served}/v1/audio/voices", timeout=30).json()["voices"]
    capsys.readouterr()
    assert main(["synthesize", "--checkpoint", str(run), "--list-voices"]) == 0
    printed = capsys.readouterr().out.splitlines()
    ids = speaker_ids(exported)
    assert [v["name"] for v in listed] == printed == sorted(ids, key=ids.get) == [*SPEAKERS, "neutral"]
    assert [v["source"] for v in listed] == ["training speaker", "training speaker", "no reference"]


def say_in_each(run: Path, url: str, config: Path, name: str, out: Path) -> dict[str, np.ndarray]:
    """``TEXT`` in the voice ``name``, seed 0: served, synthesized, and by Piper's runtime from
    the export with that voice's speaker id, as its graph makes it (Piper would otherwise scale
    the sentence to full range) → {where: audio at the model's rate}."""
    from piper import PiperVoice
    from piper.config import SynthesisConfig

    r = httpx.post(f"{url}/v1/audio/speech", timeout=120, json={
        "model": "myxtts", "input": TEXT, "voice": name, "response_format": "wav"})
    assert r.status_code == 200, r.text
    (out / "served.wav").write_bytes(r.content)
    assert main(["synthesize", "--checkpoint", str(run), "--voice", name, "--text", TEXT, "--seed", "0",
                 "--out", str(out / "synthesized.wav")]) == 0
    voice = PiperVoice.load(config.with_suffix(""))
    (chunk,) = voice.synthesize(TEXT, SynthesisConfig(speaker_id=speaker_ids(config)[name], normalize_audio=False))
    said = {where: sf.read(out / f"{where}.wav", dtype="float32") for where in ("served", "synthesized")}
    assert {rate for _, rate in said.values()} == {chunk.sample_rate} == {SAMPLE_RATE}
    return {"served": said["served"][0], "synthesized": said["synthesized"][0], "piper": chunk.audio_float_array}


def gap(a: np.ndarray, b: np.ndarray) -> float:
    """The largest sample difference of two clips; infinite where their lengths differ."""
    return float(np.abs(a - b).max()) if a.shape == b.shape else math.inf


def test_a_training_voice_by_name_is_the_same_voice_served_synthesized_and_exported(run, served, exported,
                                                                                    tmp_path):
    pytest.importorskip("piper")  # piper-tts: a test dependency (the dev extra)
    from myxtts.speaker_encoder import SpeakerEncoder, cosine

    encoder = SpeakerEncoder()  # needs the eval extra (resemblyzer's weights)
    said = say_in_each(run, served, exported, "ben", tmp_path)
    heard = {where: encoder.embed(wav, SAMPLE_RATE) for where, wav in said.items()}
    for a, b in itertools.combinations(said, 2):
        assert cosine(heard[a], heard[b]) >= SAME_VOICE, (a, b, cosine(heard[a], heard[b]))
        assert gap(said[a], said[b]) < SAME_AUDIO, (a, b, gap(said[a], said[b]))
    # the other training speaker on the same text: audio of its own, which the encoder hears as
    # the same voice (see the module docstring), so the audio is what tells the two apart
    assert main(["synthesize", "--checkpoint", str(run), "--voice", "anna", "--text", TEXT, "--seed", "0",
                 "--out", str(tmp_path / "anna.wav")]) == 0
    other, _ = sf.read(tmp_path / "anna.wav", dtype="float32")
    assert gap(other, said["synthesized"]) > 10 * SAME_AUDIO


def test_a_voice_is_named_or_given_and_an_unknown_name_lists_the_voices_closest_first(run, capsys):
    capsys.readouterr()
    say = ["synthesize", "--checkpoint", str(run), "--text", "Hello."]
    assert main([*say, "--voice", "ben", "--reference", str(CLIP)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "myxtts synthesize: error: --voice names a voice of the run and --reference gives one: give one of them"]
    assert main([*say, "--voice", "bem"]) == 2
    said = capsys.readouterr()
    assert said.out == "" and "Traceback" not in said.err
    assert said.err.splitlines()[-1] == ("myxtts synthesize: error: unknown voice 'bem'; the run's voices, "
                                         "closest first: ben, neutral, anna")
