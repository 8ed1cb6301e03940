"""The demo's choices of text and of step cap (the whole demo runs in
tests/commands/test_every_command.py)."""
from myxtts import demo
from myxtts.demo import step_cap


def test_demo_trains_the_presets_model_and_falls_back_to_characters_without_espeak(monkeypatch, capsys):
    monkeypatch.setattr(demo, "phonemes_missing", lambda: None)
    assert demo.text_settings() == []  # the preset's duration decoder on phonemes, any device
    monkeypatch.setattr(demo, "phonemes_missing", lambda: "needs espeak-ng: pip install X")
    assert demo.text_settings() == ["text.mode=characters"]
    assert "training on characters" in capsys.readouterr().out


def test_a_longer_demo_is_not_cut_short_by_the_preset_step_cap():
    assert step_cap(2000, 3) == 2000  # the default demo: the preset's own cap
    assert step_cap(2000, 1) == 2000
    assert step_cap(2000, 60) == 40000  # an hour: 20x the steps, so the hour is what ends it
