import pytest
import yaml

from myxtts import config as C


def test_defaults_are_valid_and_roundtrip_yaml(tmp_path):
    cfg = C.load()
    path = tmp_path / "c.yaml"
    cfg.save(path)
    assert C.load(path) == cfg


def test_overrides_reach_typed_fields():
    cfg = C.load(None, ["train.max_steps=7", "audio.trim_silence=false", "train.lr=3e-4",
                        "data.frame_budget=4096"])
    assert cfg.train.max_steps == 7 and cfg.audio.trim_silence is False
    assert cfg.train.lr == pytest.approx(3e-4) and cfg.data.frame_budget == 4096


@pytest.mark.parametrize("override, message", [
    ("train.max_stpes=3", "did you mean 'max_steps'"),
    ("trian.max_steps=3", "did you mean 'train'"),
    ("train.max_steps=abc", "train.max_steps: expected an integer"),
    ("train.max_steps=0", "below the minimum"),
    ("data.val_fraction=0.9", "above the maximum"),
    ("train.compile=fast", "not one of"),
    ("train.compile=max-autotune", "not one of auto, off, default, cudagraphs, regional"),
    ("train.schedule=noam", "not one of cosine, constant"),
    ("data.budget_mode=linear", "^data.budget_mode was removed: .*delete the setting$"),
    ("data.frame_budget=lots", "data.frame_budget: expected an integer, got 'lots' \\(or auto\\)"),
    ("data.frame_budget=32", "below the minimum 64"),
    ("audio.trim_silence=maybe", "expected true/false"),
    ("train", "not of the form"),
    ("train=3", "is a section"),
    ("audio.win_length=2048", "must not exceed audio.n_fft"),
    ("model.frame_kernel=4", "model.frame_kernel \\(4\\) must be odd"),
])
def test_invalid_settings_name_the_key(override, message):
    with pytest.raises(C.ConfigError, match=message):
        C.load(None, [override])


def test_yaml_file_errors_name_the_key(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("model:\n  d_modle: 128\n")
    with pytest.raises(C.ConfigError, match="model.d_modle.*did you mean 'd_model'"):
        C.load(p)
    with pytest.raises(C.ConfigError, match="not found"):
        C.load(tmp_path / "missing.yaml")


def test_a_file_naming_a_removed_setting_says_so(tmp_path):
    p = tmp_path / "old.yaml"
    p.write_text("data:\n  budget_mode: linear\n")
    with pytest.raises(C.ConfigError, match="^data.budget_mode was removed: batch sizes always follow"):
        C.load(p)


def test_a_saved_config_of_the_hifigan_vocoder_still_loads_but_naming_its_settings_is_an_error(tmp_path):
    """A run folder written before the vocoder changed holds vocoder.preset and
    vocoder.fm_loss_weight: its acoustic run still resumes (they changed nothing it does), while
    a config file or command line naming them gets what to do instead."""
    old = C.load("tiny").to_dict()
    old["vocoder"] |= {"preset": "v1", "fm_loss_weight": 2.0}
    saved = tmp_path / "config.yaml"
    saved.write_text(yaml.safe_dump(old))
    assert C.load(saved, ["train.max_steps=9"], saved=True) == C.load("tiny", ["train.max_steps=9"])
    with pytest.raises(C.ConfigError, match="^vocoder.(preset|fm_loss_weight) was removed: "):
        C.load(saved)
    with pytest.raises(C.ConfigError, match="^vocoder.fm_loss_weight was removed: .*without a discriminator"):
        C.load(saved, ["vocoder.fm_loss_weight=2"], saved=True)


def test_frame_budget_is_auto_by_default_or_a_number(tmp_path):
    cfg = C.load("tiny")
    assert cfg.data.frame_budget == "auto" and cfg.data.fixed_budget == cfg.data.base_frame_budget == 4000
    assert C.load("base").data.fixed_budget == 12000
    fixed = C.load("tiny", ["data.frame_budget=2000"]).data
    assert fixed.frame_budget == 2000 and fixed.fixed_budget == 2000
    cfg.save(tmp_path / "c.yaml")
    assert C.load(tmp_path / "c.yaml").data.frame_budget == "auto"


def test_every_preset_defaults_to_the_decoder_that_speaks_on_phonemes():
    from pathlib import Path

    presets = sorted(p.stem for p in (Path(__file__).parents[1] / "configs").glob("*.yaml"))
    assert {"tiny", "small", "base", "xtts"} <= set(presets)
    for name in [None, *presets]:
        cfg = C.load(name, [])
        assert (cfg.model.decoder, cfg.text.mode) == ("duration", "phonemes"), name


@pytest.mark.parametrize("preset", ["tiny", "small", "base", "xtts"])
def test_each_preset_header_states_its_parameter_counts(preset):
    """The first lines of a preset say how large each decoder makes it; they say what the models
    built from it hold (on the meta device: no memory)."""
    import re
    from pathlib import Path

    import torch

    from myxtts.models.checkpoint import build_model

    head = " ".join((Path(C.__file__).parent.parent / "configs" / f"{preset}.yaml").read_text().splitlines()[:2])
    said = re.search(r"([\d.]+) M parameters with the autoregressive decoder, ([\d.]+) M with the duration", head)
    assert said, head
    for count, decoder in zip(said.groups(), ("autoregressive", "duration")):
        with torch.device("meta"):
            model = build_model("acoustic", C.load(preset, [f"model.decoder={decoder}"]), 100)
        assert round(sum(p.numel() for p in model.parameters()) / 1e6, 2 if preset == "tiny" else 1) == float(count)
