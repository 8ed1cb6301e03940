"""Model files: one .safetensors, readable by safetensors alone, self-describing, atomic, and
clear errors for anything else."""
import json

import pytest
import torch
import yaml
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from myxtts.errors import UserError
from myxtts.models.checkpoint import FORMAT_VERSION, load_model, load_weights, save_model
from myxtts.models.vocoder import VocosGenerator, build_generator
from myxtts.models.xtts import XTTS
from myxtts.rundir import resolve_checkpoint

from .conftest import random_batch, tiny

SYMBOLS = ["<pad>", "<eos>"] + list(" abcdefghijklmnopqrstuvwxyz.,") + [f"x{i}" for i in range(9)]


def _model(cfg):
    torch.manual_seed(0)
    return XTTS(cfg.model, len(SYMBOLS), cfg.audio.n_mels)


def test_round_trip_with_safetensors_alone(tmp_path):
    cfg = tiny("model.prenet_dropout=0")
    model = _model(cfg)
    path = save_model(tmp_path / "m.safetensors", model, cfg, SYMBOLS, step=1234)
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no temp file left behind

    # Plain safetensors reads it: the weights, and the metadata as strings.
    tensors = load_file(str(path))
    assert set(tensors) == set(model.state_dict())
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    assert meta["format"] == "myxtts" and meta["format_version"] == str(FORMAT_VERSION)
    assert meta["kind"] == "acoustic" and meta["step"] == "1234"
    assert json.loads(meta["vocab"]) == SYMBOLS and "d_model: 128" in meta["config"]

    loaded, cfg2, symbols, meta2 = load_model(path)
    assert cfg2 == cfg and symbols == SYMBOLS and meta2["step"] == 1234
    assert not loaded.training
    batch = random_batch(n_vocab=len(SYMBOLS))
    model.eval()
    with torch.no_grad():
        a, b = model(batch), loaded(batch)
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_load_weights_into_existing_and_compiled_module(tmp_path):
    cfg = tiny()
    model = _model(cfg)
    path = save_model(tmp_path / "m.safetensors", torch.compile(model), cfg, SYMBOLS)  # no prefix
    assert not any(k.startswith("_orig_mod") for k in load_file(str(path)))
    other = XTTS(cfg.model, len(SYMBOLS), cfg.audio.n_mels)
    load_weights(other, path)
    for (k, v), w in zip(model.state_dict().items(), other.state_dict().values()):
        assert torch.equal(v, w), k


def test_vocoder_round_trip(tmp_path):
    cfg = tiny()
    gen = build_generator(cfg)
    path = save_model(tmp_path / "v.safetensors", gen, cfg, SYMBOLS, kind="vocoder")
    loaded, _, _, meta = load_model(path)
    assert meta["kind"] == "vocoder" and isinstance(loaded, VocosGenerator)
    mel = torch.randn(1, 6, cfg.audio.n_mels) - 5
    with torch.no_grad():
        assert torch.equal(gen.eval()(mel), loaded(mel))


def test_resolve_run_directory_picks_newest(tmp_path):
    cfg = tiny()
    model = _model(cfg)
    run = tmp_path / "run"
    for step in (900, 1000, 200):
        save_model(run / "checkpoints" / f"step-{step:08d}" / "model.safetensors", model, cfg,
                   SYMBOLS, step=step)
    (run / "checkpoints" / "step-00005000").mkdir()  # unfinished: no model file
    assert resolve_checkpoint(run).parent.name == "step-00001000"
    assert load_model(resolve_checkpoint(run))[3]["step"] == 1000
    flat = tmp_path / "flat"
    save_model(flat / "model.safetensors", model, cfg, SYMBOLS)
    assert resolve_checkpoint(flat) == flat / "model.safetensors"


def test_clear_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_model(tmp_path / "missing.safetensors")
    (tmp_path / "empty_run").mkdir()
    with pytest.raises(UserError, match="no checkpoint"):
        resolve_checkpoint(tmp_path / "empty_run")
    with pytest.raises(UserError, match="is a folder, not a model file"):  # a run is rundir's to resolve
        load_model(tmp_path / "empty_run")
    junk = tmp_path / "junk.safetensors"
    junk.write_text("model: not really\n")
    with pytest.raises(UserError, match="not a MyXTTS checkpoint"):
        load_model(junk)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign), metadata={"format": "pt"})
    with pytest.raises(UserError, match="not a MyXTTS checkpoint"):
        load_model(foreign)
    cfg = tiny()
    path = save_model(tmp_path / "m.safetensors", _model(cfg), cfg, SYMBOLS)
    tensors = load_file(str(path))
    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata())
    meta["format_version"] = str(FORMAT_VERSION + 1)
    save_file(tensors, str(tmp_path / "future.safetensors"), metadata=meta)
    with pytest.raises(UserError, match="format version"):
        load_model(tmp_path / "future.safetensors")


def test_acoustic_checkpoint_of_the_rmsnorm_format_is_refused(tmp_path):
    """Version-1 acoustic weights (RMSNorm) have the names and shapes of today's (LayerNorm):
    they must be refused by version, not loaded into other maths."""
    cfg = tiny()
    path = save_model(tmp_path / "m.safetensors", _model(cfg), cfg, SYMBOLS)
    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata())
    save_file(load_file(str(path)), str(tmp_path / "old.safetensors"), metadata={**meta, "format_version": "1"})
    with pytest.raises(UserError, match="acoustic checkpoint of format version 1"):
        load_model(tmp_path / "old.safetensors")


def test_vocoder_files_of_the_hifigan_format_are_refused_by_version(tmp_path):
    """Vocoder files before version 3 hold a HiFi-GAN generator: one line names the version,
    rather than a list of weights that do not fit."""
    cfg = tiny()
    path = save_model(tmp_path / "v.safetensors", build_generator(cfg), cfg, SYMBOLS, kind="vocoder")
    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata())
    for old in ("1", "2"):
        save_file(load_file(str(path)), str(tmp_path / "old.safetensors"), metadata={**meta, "format_version": old})
        with pytest.raises(UserError, match=f"vocoder checkpoint of format version {old} .* reads vocoder "
                                            "checkpoints of format version 3, 4"):
            load_model(tmp_path / "old.safetensors")


def test_an_acoustic_model_from_before_the_vocoder_changed_still_loads(tmp_path):
    """Its header's config names the HiFi-GAN vocoder's settings (preset, fm_loss_weight): they
    never shaped an acoustic weight, so the model loads as it did."""
    cfg = tiny()
    path = save_model(tmp_path / "m.safetensors", _model(cfg), cfg, SYMBOLS)
    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata())
    old = yaml.safe_load(meta["config"])
    old["vocoder"] |= {"preset": "v1", "fm_loss_weight": 2.0}
    save_file(load_file(str(path)), str(tmp_path / "old.safetensors"),
              metadata={**meta, "config": yaml.safe_dump(old), "format_version": "2"})
    model, loaded, _, meta = load_model(tmp_path / "old.safetensors")
    assert loaded == cfg and meta["kind"] == "acoustic"


def _as_written_before(tmp_path, model, cfg, version: str, *unsaid: str):
    """``model`` saved as a file of format ``version`` would hold it: without the model
    settings ``unsaid``, which that version did not have."""
    path = save_model(tmp_path / "m.safetensors", model, cfg, SYMBOLS)
    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata())
    old = yaml.safe_load(meta["config"])
    for key in unsaid:
        del old["model"][key]
    save_file(load_file(str(path)), str(tmp_path / "old.safetensors"),
              metadata={**meta, "config": yaml.safe_dump(old), "format_version": version})
    return tmp_path / "old.safetensors"


@pytest.mark.parametrize("version", ["3", "4"])
def test_a_model_from_before_its_settings_existed_speaks_as_it_did(tmp_path, version):
    """Format-3 files have no ``model.frame_position`` and were all "absolute" (positions in the
    utterance, position-wise feed-forwards); files before format 5 have no
    ``model.ref_self_keys`` and their resamplers' latents all attended to themselves. Read
    today, under other defaults, they must rebuild that network and compute what they
    computed, not fail on the weights or compute something else."""
    before = {"3": ("frame_position", "ref_self_keys"), "4": ("ref_self_keys",)}[version]
    cfg = tiny("model.decoder=duration", "model.ref_self_keys=true",
               "model.frame_position=" + ("absolute" if version == "3" else "local"))
    model = _model(cfg).eval()
    loaded, loaded_cfg, _, _ = load_model(_as_written_before(tmp_path, model, cfg, version, *before))
    assert loaded_cfg == cfg
    batch = random_batch()
    with torch.no_grad():
        torch.testing.assert_close(model(batch)["mel_post"], loaded(batch)["mel_post"])
    # the same files under today's defaults are other networks
    assert tiny().model.frame_position != "absolute" and not tiny().model.ref_self_keys


def test_a_model_file_from_before_the_frame_kernel_setting_convolves_over_3_frames(tmp_path):
    """Files from before ``model.frame_kernel`` have no such setting and convolved over 3 frames,
    the setting's default; tiny now sets 5, so a tiny model file read under today's preset would
    otherwise be another network."""
    cfg = tiny("model.decoder=duration", "model.frame_kernel=3")
    model = _model(cfg).eval()
    loaded, loaded_cfg, _, _ = load_model(_as_written_before(tmp_path, model, cfg, "6", "frame_kernel"))
    assert loaded_cfg.model.frame_kernel == 3 != tiny().model.frame_kernel
    batch = random_batch()
    with torch.no_grad():
        torch.testing.assert_close(model(batch)["mel_post"], loaded(batch)["mel_post"])


def test_a_model_file_keeps_its_frame_position_whatever_the_default(tmp_path):
    """Files since format 4 name theirs: one made with "local" is read as "local" and computes what
    it did."""
    cfg = tiny("model.decoder=duration", "model.frame_position=local")
    model = _model(cfg).eval()
    loaded, loaded_cfg, _, _ = load_model(save_model(tmp_path / "m.safetensors", model, cfg, SYMBOLS))
    assert loaded_cfg.model.frame_position == "local" != tiny().model.frame_position
    batch = random_batch()
    with torch.no_grad():
        torch.testing.assert_close(model(batch)["mel_post"], loaded(batch)["mel_post"])


@pytest.mark.parametrize("version", ["3", "5"])
def test_a_vocoder_from_before_the_magnitude_prior_speaks_as_it_did(tmp_path, version):
    """Vocoder files before format 6 have no ``vocoder.magnitude_prior``: their heads predicted
    the whole log-magnitude. Read today, when the default is on, they must rebuild that network
    and make the audio they made, not add the mel's magnitudes to theirs."""
    cfg = tiny("vocoder.magnitude_prior=false")
    torch.manual_seed(0)
    gen = build_generator(cfg).eval()
    path = save_model(tmp_path / "v.safetensors", gen, cfg, SYMBOLS, kind="vocoder")
    with safe_open(str(path), "pt") as f:
        meta = dict(f.metadata())
    old = yaml.safe_load(meta["config"])
    del old["vocoder"]["magnitude_prior"]
    save_file(load_file(str(path)), str(tmp_path / "old.safetensors"),
              metadata={**meta, "config": yaml.safe_dump(old), "format_version": version})
    loaded, loaded_cfg, _, _ = load_model(tmp_path / "old.safetensors")
    assert loaded_cfg == cfg and not loaded.prior
    mel = torch.randn(1, 20, cfg.audio.n_mels) - 4
    with torch.no_grad():
        torch.testing.assert_close(loaded(mel), gen(mel))
    # today's files keep theirs, on by default
    assert tiny().vocoder.magnitude_prior
    on = build_generator(tiny())
    _, on_cfg, _, _ = load_model(save_model(tmp_path / "new.safetensors", on, tiny(), SYMBOLS, kind="vocoder"))
    assert on_cfg.vocoder.magnitude_prior


def test_a_file_from_before_languages_speaks_its_one_language_as_it_did(tmp_path):
    """Format-6 files name no languages: the model reads its ``text.language`` alone, has no
    language table, and computes what it did; a model of several writes its table's order."""
    cfg = tiny("model.prenet_dropout=0", "text.language=fa")
    model = _model(cfg).eval()
    path = save_model(tmp_path / "m.safetensors", model, cfg, SYMBOLS)
    with safe_open(str(path), "pt") as f:
        meta = {k: v for k, v in f.metadata().items() if k != "languages"}
    save_file(load_file(str(path)), str(tmp_path / "old.safetensors"), metadata={**meta, "format_version": "6"})
    old, _, _, _ = load_model(tmp_path / "old.safetensors")
    assert old.languages == ("fa",) and old.text_encoder.language is None
    tokens, lens = torch.tensor([[3, 4, 5, 1]]), torch.tensor([4])  # (1, 4)
    assert torch.equal(old.text_encoder(tokens, lens)[0], model.text_encoder(tokens, lens)[0])

    two = XTTS(cfg.model, len(SYMBOLS), cfg.audio.n_mels, ("en-us", "fa"))
    loaded, _, _, meta = load_model(save_model(tmp_path / "two.safetensors", two, cfg, SYMBOLS))
    assert json.loads(meta["languages"]) == ["en-us", "fa"] and loaded.languages == ("en-us", "fa")
    assert torch.equal(loaded.text_encoder.language.weight, two.text_encoder.language.weight)
    with pytest.raises(ValueError, match="several languages"):
        loaded.text_encoder(tokens, lens)  # a sentence without its language cannot be read
