"""`Synthesizer` and `myxtts synthesize`: references of any rate, neutral voice, clear errors."""
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from myxtts.cli import main
from myxtts.config import load
from myxtts.errors import UserError
from myxtts.infer import Synthesizer
from myxtts.models.checkpoint import save_model
from myxtts.models.vocoder import HiFiGANGenerator
from myxtts.models.xtts import XTTS
from myxtts.text import TextProcessor, Vocabulary

FIXTURES = Path(__file__).parent / "fixtures"
MALE_16K = FIXTURES / "reference_voices" / "arctic_a0007_male.wav"
FEMALE_16K = FIXTURES / "reference_voices" / "arctic_a0009_slt_female.wav"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run directory holding an (untrained) tiny model; decoding is capped at 20 steps."""
    cfg = load("tiny", ["model.max_decoder_steps=20"])
    tp = TextProcessor(cfg.text)
    vocab = Vocabulary.build(Counter(tp.symbols("The quick brown fox jumps over the lazy dog, "
                                                "and she sells sea shells. Yes!?")[0]))
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(vocab), cfg.audio.n_mels)
    run = tmp_path_factory.mktemp("run")
    save_model(run / "checkpoints" / "step-00000100" / "model.safetensors", model, cfg,
               vocab.symbols, step=100)
    gen = HiFiGANGenerator(cfg.vocoder, cfg.audio.n_mels, cfg.audio.hop_length)
    save_model(run / "vocoder.safetensors", gen, cfg, vocab.symbols, kind="vocoder")
    return run


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices; and robust to a busy machine (see tests/models)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def synth(run_dir):
    return Synthesizer(run_dir, device="cpu", log=lambda m: None)


def test_16khz_reference_is_resampled_and_accepted(synth):
    mel, lens = synth.reference(MALE_16K)
    seconds = sf.info(str(MALE_16K)).duration
    # Resampled to the model's 22.05 kHz before framing (trimming may shorten it a little).
    assert mel.shape[0] == 1 and mel.shape[2] == 80 and int(lens) == mel.shape[1]
    assert 0.6 * seconds * 22050 / 256 < mel.shape[1] <= seconds * 22050 / 256 + 1
    wavs = synth(["The quick brown fox.", "Sea shells!"], reference=MALE_16K, seed=3)
    assert len(wavs) == 2
    for w in wavs:
        assert w.dtype == np.float32 and w.size % 256 == 0 and w.size > 0 and np.isfinite(w).all()


def test_any_format_and_channel_count(synth, tmp_path):
    stereo = tmp_path / "ref.flac"
    wav, sr = sf.read(str(FEMALE_16K), dtype="float32")
    sf.write(str(stereo), np.stack([wav, 0.5 * wav], axis=1), sr)
    mel, lens = synth.reference(stereo)
    assert mel.shape[2] == 80 and int(lens) > 100


def test_long_reference_is_cut_to_ten_seconds(synth, tmp_path, monkeypatch):
    wav, sr = sf.read(str(MALE_16K), dtype="float32")
    long = tmp_path / "long.wav"
    sf.write(str(long), np.concatenate([wav] * 4), sr)  # ~16 s
    notes = []
    monkeypatch.setattr(synth, "log", notes.append)
    mel, lens = synth.reference(long)
    assert mel.shape[1] <= 10 * 22050 // 256 and any("first 10 s" in n for n in notes)


def test_neutral_voice_and_seeded_determinism(synth):
    mel, lens = synth.reference(None)
    assert int(lens) == 0
    a = synth.mels(["The lazy dog."], None, seed=5)
    b = synth.mels(["The lazy dog."], None, seed=5)
    assert torch.equal(a[0], b[0])


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


def test_unknown_characters_are_a_user_error(synth):
    with pytest.raises(UserError, match="not trained on"):
        synth(["The fox was großartig"])  # the vocabulary is English letters only


def test_vocoder_checkpoint_is_used(run_dir):
    s = Synthesizer(run_dir, vocoder=run_dir / "vocoder.safetensors", log=lambda m: None)
    wav = s(["The fox."], seed=0)[0]
    assert wav.size % 256 == 0 and np.isfinite(wav).all()
    with pytest.raises(UserError, match="acoustic"):
        Synthesizer(run_dir / "vocoder.safetensors")


def test_command_line(run_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("The quick brown fox.\n\nShe sells sea shells.\n")
    out = tmp_path / "out"
    assert main(["synthesize", "--checkpoint", str(run_dir), "--texts", str(texts), "--out",
                 str(out), "--reference", str(FEMALE_16K), "--seed", "1", "--device", "cpu"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["001.wav", "002.wav"]
    info = sf.info(str(out / "001.wav"))
    assert info.samplerate == 22050 and info.channels == 1
    assert "Griffin-Lim" in capsys.readouterr().err  # the quality note

    assert main(["synthesize", "--checkpoint", str(run_dir), "--text", "Quark 42 ü",
                 "--out", str(tmp_path / "x.wav")]) == 2
    assert "not trained on" in capsys.readouterr().err
    assert main(["synthesize", "--checkpoint", str(tmp_path / "nothing"), "--text", "The fox"]) == 2
    assert "not found" in capsys.readouterr().err


def test_command_line_subprocess_single_file(run_dir, tmp_path, myxtts_cmd):
    out = tmp_path / "one.wav"
    r = subprocess.run([*myxtts_cmd, "synthesize", "--checkpoint", str(run_dir), "--text",
                        "The quick brown fox.", "--out", str(out), "--vocoder",
                        str(run_dir / "vocoder.safetensors")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.is_file() and "Griffin-Lim" not in r.stderr
