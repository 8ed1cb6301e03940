import json

import numpy as np
import yaml

from myxtts.commands.demo import describe
from myxtts.infer import Synthesis
from tests.commands.test_every_command import has_sound, myxtts, ok, one_line_error


def test_describe_gives_figures_and_warns_on_silent_or_cut_audio():
    t = np.arange(22050) / 22050
    loud = Synthesis("Hi.", (0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 22050,
                     parts=1, cut=0)
    text = describe(loud, cap=500)
    assert "1.00 s, peak -6.0 dBFS, RMS -9.0 dBFS, stopped on its own" in text
    assert "WARNING" not in text

    silent = Synthesis("Hi.", np.zeros(22050, np.float32), 22050, parts=1, cut=1)
    text = describe(silent, cap=500)
    assert "WARNING: the wav is silent" in text and "did not stop on its own" in text
    assert "cut at model.max_decoder_steps=500" in text


def test_the_persian_demo_runs_its_three_steps_on_the_persian_corpus(tmp_path):
    out = tmp_path / "demo"
    r = ok(myxtts("demo", "--language", "fa", "--steps", "1", "--out", out))
    has_sound(out / "demo.wav")
    assert set(json.loads((out / "demo_timings.json").read_text())) == {"prepare", "train", "synthesize"}
    assert "300 utterances" in r.stdout + r.stderr and "reference voice: spk2-" in r.stdout
    assert yaml.safe_load((out / "run" / "config.yaml").read_text())["text"]["language"] == "fa"


def test_a_language_without_a_demo_is_one_line_naming_those_with_one(tmp_path):
    out = tmp_path / "demo"
    line = one_line_error(myxtts("demo", "--language", "de", "--out", out), "demo")
    assert "--language de" in line and "demos: en, fa" in line
    assert not out.exists()
