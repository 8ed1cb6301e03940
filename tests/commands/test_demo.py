import numpy as np

from myxtts.commands.demo import describe
from myxtts.infer import Synthesis


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


def test_demo_trains_the_presets_model_and_falls_back_to_characters_without_espeak(monkeypatch, capsys):
    from myxtts.commands import demo

    monkeypatch.setattr(demo, "phonemes_missing", lambda: None)
    assert demo.text_settings() == []  # the preset's duration decoder on phonemes, any device
    monkeypatch.setattr(demo, "phonemes_missing", lambda: "needs espeak-ng: pip install X")
    assert demo.text_settings() == ["text.mode=characters"]
    assert "training on characters" in capsys.readouterr().out


def test_a_longer_demo_is_not_cut_short_by_the_preset_step_cap():
    from myxtts.commands.demo import step_cap

    assert step_cap(2000, 3) == 2000  # the default demo: the preset's own cap
    assert step_cap(2000, 1) == 2000
    assert step_cap(2000, 60) == 40000  # an hour: 20x the steps, so the hour is what ends it
