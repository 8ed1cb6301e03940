
import numpy as np

from myxtts.commands.demo import describe
from myxtts.infer import Synthesis
from tests.commands.test_every_command import myxtts, one_line_error


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


def test_a_language_without_a_demo_is_one_line_naming_those_with_one(tmp_path):
    out = tmp_path / "demo"
    line = one_line_error(myxtts("demo", "--language", "de", "--out", out), "demo")
    assert "--language de" in line and "demos: en, fa" in line
    assert not out.exists()
