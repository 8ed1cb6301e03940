"""`Synthesizer` and `myxtts synthesize`: references of any rate, neutral voice, clear errors."""
import math
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from myxtts import audio
from myxtts.cli import main
from myxtts.config import load
from myxtts.errors import UserError
from myxtts.infer import Synthesizer
from myxtts.models.checkpoint import save_model
from myxtts.models.vocoder import build_generator
from myxtts.models.xtts import XTTS
from myxtts.text import TextProcessor, Vocabulary

FIXTURES = Path(__file__).parent / "fixtures"
MALE_16K = FIXTURES / "reference_voices" / "arctic_a0007_male.wav"
FEMALE_16K = FIXTURES / "reference_voices" / "arctic_a0009_slt_female.wav"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory holding an (untrained) tiny model; decoding is capped at 20 steps."""
    # The autoregressive decoder on characters: the stop token, the cap and the
    # letter-by-letter stand-ins are what these tests read.
    cfg = load("tiny", ["model.max_decoder_steps=20", "model.decoder=autoregressive",
                        "text.mode=characters"])
    tp = TextProcessor(cfg.text)
    vocab = Vocabulary.build(Counter(tp.symbols("The quick brown fox jumps over the lazy dog, "
                                                "and she sells sea shells. Yes!?")[0]))
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(vocab), cfg.audio.n_mels)
    run = tmp_path_factory.mktemp("run")
    save_model(run / "checkpoints" / "step-00000100" / "model.safetensors", model, cfg,
               vocab.symbols, step=100)
    gen = build_generator(cfg)
    save_model(run / "vocoder.safetensors", gen, cfg, vocab.symbols, kind="vocoder")
    return run




@pytest.fixture(scope="module")
def synth(run_dir):
    return Synthesizer(run_dir, device="cpu", log=lambda m: None)


def test_16khz_reference_is_resampled_and_accepted(synth):
    ref = synth.reference(MALE_16K)
    seconds = min(sf.info(str(MALE_16K)).duration, synth.cfg.data.ref_seconds)
    # Resampled to the model's 22.05 kHz before framing (trimming may shorten it a little).
    assert ref.mel.shape[1] == 80 and ref.mel.dtype == torch.float32
    assert 0.6 * seconds * 22050 / 256 < ref.frames <= seconds * 22050 / 256 + 1
    results = synth.synthesize(["The quick brown fox.", "Sea shells!"], voice=MALE_16K, seed=3)
    assert len(results) == 2
    for r in results:
        w = r.wav
        assert w.dtype == np.float32 and w.size % 256 == 0 and w.size > 0 and np.isfinite(w).all()
        assert r.peak > 1e-3 and not r.silent  # Griffin-Lim of an untrained model's mel is noise


def test_any_format_and_channel_count(synth, tmp_path):
    stereo = tmp_path / "ref.flac"
    wav, sr = sf.read(str(FEMALE_16K), dtype="float32")
    sf.write(str(stereo), np.stack([wav, 0.5 * wav], axis=1), sr)
    ref = synth.reference(stereo)
    assert ref.mel.shape[1] == 80 and ref.frames > 100


def test_a_long_reference_is_cut_to_what_training_showed_the_model(synth, tmp_path, monkeypatch):
    wav, sr = sf.read(str(MALE_16K), dtype="float32")
    long = tmp_path / "long.wav"
    sf.write(str(long), np.concatenate([wav] * 4), sr)  # ~16 s
    notes = []
    monkeypatch.setattr(synth, "log", notes.append)
    ref = synth.reference(long)
    assert synth.cfg.data.ref_seconds == 3.0
    assert ref.frames == math.ceil(3.0 * 22050 / 256)
    assert any("using its first 3 s, the length the model was trained with" in n for n in notes)


def test_neutral_voice_and_seeded_determinism(synth):
    assert synth.reference(None).frames == 0
    a = synth.synthesize(["The lazy dog."], None, seed=5)[0].wav
    b = synth.synthesize(["The lazy dog."], None, seed=5)[0].wav
    assert np.array_equal(a, b)


def test_reference_errors(synth, tmp_path):
    silent = tmp_path / "silent.wav"
    sf.write(str(silent), np.zeros(32000, dtype=np.float32), 16000)
    with pytest.raises(UserError, match="silent"):
        synth.reference(silent)
    quiet = tmp_path / "quiet.wav"  # -70 dBFS hiss: silence to any listener
    sf.write(str(quiet), (np.random.default_rng(0).standard_normal(32000) * 10 ** (-70 / 20))
             .astype(np.float32), 16000)
    with pytest.raises(UserError, match="silent"):
        synth.reference(quiet)
    with pytest.raises(UserError, match="not found"):
        synth.reference(tmp_path / "nope.wav")
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF not really a wav")
    with pytest.raises(UserError, match="unreadable"):
        synth.reference(broken)


def test_unknown_letters_are_a_user_error(synth):
    with pytest.raises(UserError, match="not trained on: 'ß'"):
        synth.synthesize(["The fox was großartig"])  # no ASCII base letter
    with pytest.raises(UserError, match="not trained on: 'ж'") as err:
        synth.synthesize(["The fox " * 30 + "жил"])
    quoted = str(err.value).split(" in ", 1)[1]
    assert len(quoted) <= 82  # the user's text is echoed cut to about 80 characters


def test_unseen_accents_and_punctuation_are_read_as_known_symbols(synth, monkeypatch):
    notes = []
    monkeypatch.setattr(synth, "log", notes.append)
    monkeypatch.setattr(synth.cfg.model, "max_decoder_steps", 500)  # one part: a short sentence
    monkeypatch.setattr(synth.model, "generate", _fake_generate([30], 0.0))
    # The vocabulary has no 'é', no ':' and no dash ('–' becomes '-'): it is still spoken.
    [res] = synth.synthesize(["Café fox: yes – the dog."])
    assert res.wav.size == 30 * 256 and res.parts == 1
    warning = next(n for n in notes if "not in the training text" in n)
    assert "'é' as 'e'" in warning and "':' as ','" in warning and "'-' as ','" in warning


def test_vocoder_checkpoint_is_used(run_dir):
    s = Synthesizer(run_dir, vocoder=run_dir / "vocoder.safetensors", log=lambda m: None)
    wav = s.synthesize(["The fox."], seed=0)[0].wav
    assert wav.size % 256 == 0 and np.isfinite(wav).all()
    with pytest.raises(UserError, match="acoustic"):
        Synthesizer(run_dir / "vocoder.safetensors")
    with pytest.raises(UserError, match="not a vocoder"):
        Synthesizer(run_dir, vocoder=run_dir)


def test_the_runs_own_vocoder_is_used_unasked_and_says_so(run_dir, tmp_path):
    """A vocoder in RUN/vocoder turns that run's mels into audio without --vocoder, from the run
    folder or any checkpoint in it; --vocoder griffin-lim asks for none."""
    run = tmp_path / "run"
    shutil.copytree(run_dir / "checkpoints", run / "checkpoints")
    step = run / "checkpoints" / "step-00000100"
    (run / "plan.json").write_text("{}")
    (step / "resume.json").write_text("{}")  # a checkpoint's copy of the plan
    (step / "plan.json").write_text("{}")  # its name in checkpoints of older runs
    said = []
    assert Synthesizer(run, log=said.append).to_wave.griffin_lim  # no vocoder trained yet
    (run / "vocoder").mkdir()
    shutil.copy(run_dir / "vocoder.safetensors", run / "vocoder" / "model.safetensors")
    for checkpoint in (run, step, step / "model.safetensors"):
        s = Synthesizer(checkpoint, log=said.append)
        assert not s.to_wave.griffin_lim
        assert s.to_wave.name.startswith(str(run.resolve() / "vocoder" / "model.safetensors"))
    said.clear()
    s.synthesize_to_file(["The fox."], tmp_path / "fox.wav")
    assert any(x.startswith(f"vocoder: {run.resolve() / 'vocoder'}") for x in said)
    assert not any("Griffin-Lim" in x for x in said)
    assert Synthesizer(run, vocoder="griffin-lim", log=said.append).to_wave.griffin_lim


def test_command_line(run_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("The quick brown fox.\n\nShe sells sea shells.\n")
    out = tmp_path / "out"
    assert main(["synthesize", "--checkpoint", str(run_dir), "--texts", str(texts), "--out",
                 str(out), "--reference", str(FEMALE_16K), "--seed", "1", "--device", "cpu"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["001.wav", "002.wav"]
    info = sf.info(str(out / "001.wav"))
    assert info.samplerate == 22050 and info.channels == 1
    err = capsys.readouterr().err
    assert "Griffin-Lim" in err and "intelligible" not in err  # the quality note, no promises
    assert "did not stop on its own" in err  # the untrained model runs into the 20-step cap

    assert main(["synthesize", "--checkpoint", str(run_dir), "--text", "Quark 42 ü",
                 "--out", str(tmp_path / "x.wav")]) == 0
    assert "'ü' as 'u'" in capsys.readouterr().err
    assert main(["synthesize", "--checkpoint", str(run_dir), "--text", "Quark 42 ж",
                 "--out", str(tmp_path / "x.wav")]) == 2
    assert "not trained on: 'ж'" in capsys.readouterr().err
    assert main(["synthesize", "--checkpoint", str(tmp_path / "nothing"), "--text", "The fox"]) == 2
    assert "not found" in capsys.readouterr().err


def test_synthesize_speaks_the_models_language_and_names_it_for_any_other(run_dir, tmp_path, capsys):
    out = tmp_path / "x.wav"
    assert main(["synthesize", "--checkpoint", str(run_dir), "--text", "The fox.", "--language", "en-us",
                 "--out", str(out)]) == 0
    assert out.is_file() and "language: en-us" in capsys.readouterr().out
    for code, why in (("fa", "language fa: "), ("xx-nowhere", "unknown language code 'xx-nowhere'")):
        out.unlink(missing_ok=True)
        assert main(["synthesize", "--checkpoint", str(run_dir), "--text", "The fox.", "--language", code,
                     "--out", str(out)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines[-1].startswith(f"myxtts synthesize: error: {why}")
        assert lines[-1].endswith("this model speaks en-us only")
        assert "Traceback" not in "\n".join(lines) and not out.exists()


def test_languages_are_the_one_list_every_way_out_checks(synth):
    assert synth.languages == ["en-us"] and synth.language() == synth.language("en-us") == "en-us"
    with pytest.raises(UserError, match="language de: this model speaks en-us only"):
        synth.encode("The fox.", "de")


def _fake_generate(lengths, value):
    """Stand-in for the model's decoder: the i-th sentence of a batch gives lengths[i] frames
    of log-mel ``value`` (the floor value is digital silence)."""
    calls = iter(lengths)

    def generate(tokens, token_lens, ref_mel, ref_lens, generator=None):
        lens = torch.tensor([next(calls) for _ in range(tokens.shape[0])])
        mel = torch.full((tokens.shape[0], int(lens.max()), 80), value)
        return mel, lens, torch.zeros(tokens.shape[0], int(lens.max()), tokens.shape[1])
    return generate


def test_silent_and_cut_outputs_are_reported(synth, monkeypatch):
    notes = []
    monkeypatch.setattr(synth, "log", notes.append)
    cap = synth.cfg.model.max_decoder_steps * synth.cfg.model.reduction  # frames
    floor = float(np.log(audio.LOG_FLOOR))
    monkeypatch.setattr(synth.model, "generate", _fake_generate([12], floor))
    [res] = synth.synthesize(["Yes."])
    assert res.silent and res.stopped and res.peak < 1e-3
    assert any("is silent" in n for n in notes) and not any("did not stop" in n for n in notes)

    notes.clear()
    monkeypatch.setattr(synth.model, "generate", _fake_generate([cap], 0.0))  # loud, never stops
    [res] = synth.synthesize(["Yes."])
    assert not res.silent and not res.stopped and res.cut == 1
    assert res.rms > 0.01 and res.seconds == cap * 256 / 22050
    assert any("did not stop on its own" in n and "max_decoder_steps=20" in n for n in notes)
    assert not any("is silent" in n for n in notes)


def test_long_text_is_spoken_sentence_by_sentence_with_pauses(synth, monkeypatch):
    text = "The fox jumps. The dog sleeps! Yes?"
    monkeypatch.setattr(synth.cfg.model, "max_decoder_steps", 500)  # the tiny preset's cap
    assert synth.sentences(text) == ["the fox jumps.", "the dog sleeps!", "yes?"]
    monkeypatch.setattr(synth.model, "generate", _fake_generate([30, 20, 10], 0.0))
    [res] = synth.synthesize([text])
    pause = 22 * 256  # 0.25 s rounded to whole hops
    assert res.parts == 3 and res.stopped
    # Decoded longest text first ("the dog sleeps!" gets 30 frames, "the fox jumps." 20, "yes?"
    # 10), then put back in text order with silence between them.
    assert res.wav.size == (20 + 30 + 10) * 256 + 2 * pause
    first, gap = res.wav[:20 * 256], res.wav[20 * 256:20 * 256 + pause]
    assert np.abs(first).max() > 0.01 and np.all(gap == 0)
    assert np.abs(res.wav[20 * 256 + pause:][:30 * 256]).max() > 0.01


def test_overlong_sentence_is_split_within_the_decoder_cap(synth, monkeypatch):
    monkeypatch.setattr(synth.cfg.model, "max_decoder_steps", 500)  # 11.6 s → 116 characters
    clause = "the quick brown fox jumps over the lazy dog"
    parts = synth.sentences(", ".join([clause] * 8) + ".")
    assert len(parts) > 1 and all(len(p) <= 116 for p in parts)
    assert " ".join(parts) == ", ".join([clause] * 8) + "."
