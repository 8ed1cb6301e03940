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


def test_each_demo_says_a_sentence_none_of_its_recordings_holds_in_a_held_out_voice():
    for language, corpus in demo.DEMOS.items():
        rows = [line.split("|") for line in (corpus.path / "metadata.csv").read_text(encoding="utf-8").splitlines()]
        assert all(corpus.sentence not in (row[1], row[2]) for row in rows), language
        held_out = (corpus.path / "val.txt").read_text(encoding="utf-8").split()
        assert any(i.startswith(corpus.voice) for i in held_out), language
    assert demo.DEMOS["fa"].settings == ("text.language=fa",)
