"""One way to speak: `synthesize`, `eval`, `serve` and the training samples give the same audio
for the same text, reference and seed, with the reference cut as training cut it; a sentence is
cut only where the decoder in use needs it."""
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from myxtts import audio
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import prepare
from myxtts.evaluate.evaluation import plan, speak_sentences
from myxtts.infer import Synthesizer
from myxtts.models.checkpoint import save_model
from myxtts.models.xtts import XTTS
from myxtts.speak import neutral, reference_from_mel
from myxtts.train.samples import write_sample

LJ = Path(__file__).parent / "fixtures" / "ljspeech"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A cache of the LJSpeech clips (one single-sentence clip held out) and an untrained tiny
    model on its vocabulary, saved as a run's checkpoint."""
    root = tmp_path_factory.mktemp("speak")
    shutil.copytree(LJ, root / "lj")
    (root / "lj" / "val.txt").write_text("LJ001-0002\n")  # "in being comparatively modern."
    cfg = load("tiny")
    prepare(root / "lj", root / "cache", cfg, progress=False)
    cache = Cache(root / "cache")
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(cache.vocab), cfg.audio.n_mels)
    save_model(root / "run" / "checkpoints" / "step-00000001" / "model.safetensors", model, cfg,
               cache.vocab.symbols, step=1)
    return root, cache, Synthesizer(root / "run", vocoder="griffin-lim", device="cpu",
                                    log=lambda m: None)


def _as_written(wav: np.ndarray, path: Path, sr: int) -> np.ndarray:
    audio.save_wav(path, wav, sr)
    return sf.read(str(path), dtype="int16")[0]


def test_synthesize_eval_and_samples_say_the_same(setup, tmp_path):
    root, cache, synth = setup
    (s,) = plan(cache)
    assert s.text == "in being comparatively modern."
    said = synth.synthesize([s.text], voice=reference_from_mel(cache.mel(s.ref), synth.cfg))[0]
    assert said.parts == 1 and said.wav.size > 0

    ((heard, _),) = speak_sentences(synth, cache, [s])
    assert np.array_equal(heard.wav, said.wav)

    # The sample's voice is the first held-out utterance (this one).
    paths = write_sample(tmp_path / "sample", synth.model, cache, synth.cfg, sentence=s.text)
    same_ref = synth.synthesize([s.text], voice=reference_from_mel(cache.mel(s.index), synth.cfg))[0]
    assert np.array_equal(sf.read(str(paths["wav"]), dtype="int16")[0],
                          _as_written(same_ref.wav, tmp_path / "same.wav", synth.sample_rate))
    assert not np.array_equal(same_ref.wav, said.wav)  # another reference: another voice


def test_a_reference_is_cut_as_training_cut_it_and_batches_do_not_change_a_text(setup):
    root, cache, synth = setup
    cfg = synth.cfg
    mel = np.asarray(cache.mel(0), dtype=np.float32)
    notes = []
    ref = reference_from_mel(mel, cfg, notes.append)
    assert ref.frames == min(mel.shape[0], 259) and cfg.data.ref_seconds == 3.0  # ceil(3 * 22050 / 256)
    assert mel.shape[0] > 259 and notes and "using its first 3 s" in notes[0]
    texts = ["a printer.", "in being comparatively modern.", "the same."]
    ids = [synth.encode(t) for t in texts]
    alone = [synth.speak_ids([x], ref, seed=4)[0].mel for x in ids]
    together = synth.speak_ids(ids, ref, seed=4, batch_size=3)
    for a, b in zip(alone, together):
        assert a.shape == b.mel.shape and torch.allclose(a, b.mel, atol=1e-4)
    voiceless = synth.speak_ids(ids[:1], neutral(cfg))[0]
    assert voiceless.wav.size > 0


def test_a_voice_conditioned_once_speaks_as_one_conditioned_each_time(setup):
    from myxtts.speak import with_latents

    root, cache, synth = setup
    cfg = synth.cfg
    texts = ["a printer.", "in being comparatively modern."]
    for ref in (reference_from_mel(np.asarray(cache.mel(0), dtype=np.float32), cfg), neutral(cfg)):
        kept = with_latents(synth.model, ref)
        assert kept.latents is not None and kept.latents.shape == (cfg.model.n_latents, cfg.model.d_model)
        ids = [synth.encode(t) for t in texts]
        again = synth.speak_ids(ids, ref, batch_size=2, vocode=False)
        once = synth.speak_ids(ids, kept, batch_size=2, vocode=False)
        for a, b in zip(again, once):
            assert a.wav is None and a.mel.shape == b.mel.shape and torch.allclose(a.mel, b.mel, atol=1e-4)


def test_a_reference_carries_its_speaker_embedding_for_a_model_conditioned_on_one(setup):
    from myxtts.data import embeddings
    from myxtts.speak import reference_from_cache, reference_from_file

    root, cache, synth = setup
    plain, ge2e = load("tiny"), load("tiny", ["model.speaker_embedding=ge2e"])
    clip = Path(__file__).parent / "fixtures" / "reference_voices" / "arctic_a0009_slt_female.wav"
    ref = reference_from_file(clip, ge2e)
    assert ref.embedding.shape == (256,) and ref.embedding.dtype == torch.float32
    assert abs(float(ref.embedding.norm()) - 1) < 1e-5
    bare = reference_from_file(clip, plain)
    assert bare.embedding is None and torch.equal(bare.mel, ref.mel)  # the same mel either way
    assert reference_from_cache(cache, 0, plain).embedding is None
    # a clip at synthesis is embedded as its stored copy was for training (up to int16 and float16)
    i = cache.index.id.index("LJ001-0004")
    trained = torch.from_numpy(embeddings.ensure(cache, progress=False)[i])
    for said in (reference_from_cache(cache, i, ge2e), reference_from_file(LJ / "wavs" / "LJ001-0004.wav", ge2e)):
        assert torch.allclose(said.embedding, trained, atol=3e-3)
    assert float(ref.embedding @ trained) < 0.8  # another voice


def test_a_saved_model_conditioned_on_embeddings_speaks_in_a_files_voice(setup, tmp_path):
    from myxtts.speak import reference_from_file

    root, cache, _ = setup
    cfg = load("tiny", ["model.speaker_embedding=ge2e"])
    torch.manual_seed(0)
    model = XTTS(cfg.model, len(cache.vocab), cfg.audio.n_mels)
    with torch.no_grad():
        model.speaker_proj.weight.mul_(50)  # heard as a trained model's (see models/test_speaker_embedding)
    save_model(tmp_path / "run" / "checkpoints" / "step-00000001" / "model.safetensors", model, cfg,
               cache.vocab.symbols, step=1)
    synth = Synthesizer(tmp_path / "run", vocoder="griffin-lim", device="cpu", log=lambda m: None)
    assert synth.cfg.model.speaker_embedding == "ge2e"
    assert torch.equal(synth.model.speaker_proj.weight, model.speaker_proj.weight)
    clips = sorted((Path(__file__).parent / "fixtures" / "reference_voices").glob("*.wav"))
    said = [synth.synthesize(["in being comparatively modern."], voice=clip)[0] for clip in clips]
    assert all(s.wav.size > 0 for s in said)
    refs = [reference_from_file(clip, synth.cfg) for clip in clips]
    assert all(r.embedding is not None for r in refs)
    # the same mel from the file's reference, without its embedding, is another voice
    bare = synth.synthesize(["in being comparatively modern."], voice=replace(refs[0], embedding=None))[0]
    assert bare.wav.shape != said[0].wav.shape or not np.allclose(bare.wav, said[0].wav, atol=1e-4)


def test_a_model_conditioned_on_embeddings_refuses_a_reference_the_encoder_hears_no_voice_in(monkeypatch):
    """The clip has sound, but the GE2E encoder's own trimming leaves none: one line, not the
    neutral voice's zero row in its place; a model without embeddings takes the clip as before."""
    from myxtts import speaker_encoder as speaker
    from myxtts.errors import UserError
    from myxtts.speak import reference_from_file

    class Deaf:
        def embed(self, wav, sample_rate):
            return None

    monkeypatch.setattr(speaker, "shared_encoder", lambda: Deaf())
    clip = Path(__file__).parent / "fixtures" / "reference_voices" / "arctic_a0009_slt_female.wav"
    with pytest.raises(UserError) as e:
        reference_from_file(clip, load("tiny", ["model.speaker_embedding=ge2e"]))
    assert "hears no voice" in str(e.value) and "\n" not in str(e.value)
    assert reference_from_file(clip, load("tiny")).frames > 0


LONG = ("the printers of the fifteenth century had a great advantage over all who came after them, "
        "for they cut their own letters and set every line of their books as they pleased and without "
        "any rules at all.")


def test_synthesize_and_eval_give_the_same_audio_for_a_text_of_two_sentences(setup, tmp_path):
    """``myxtts synthesize``'s path and ``eval``'s speak a text alike: cut into the same
    sentences, decoded together, joined with the same pause, bit for bit."""
    from myxtts.evaluate.evaluation import plan_texts
    from myxtts.speak import reference_from_cache

    root, cache, synth = setup
    text = "a printer of books. in being comparatively modern."
    (s,) = plan_texts(cache, [text])
    ((heard, _),) = speak_sentences(synth, cache, [s], seed=7)
    (written,) = synth.synthesize_to_file([text], tmp_path / "said.wav",
                                          reference_from_cache(cache, s.ref, synth.cfg), seed=7)
    assert written.parts == heard.parts == 2 and np.array_equal(written.wav, heard.wav)
    assert np.array_equal(sf.read(str(written.path), dtype="int16")[0],
                          _as_written(heard.wav, tmp_path / "heard.wav", synth.sample_rate))


def test_a_long_sentence_is_cut_only_where_the_decoder_needs_it(setup):
    """The duration decoder speaks a 200-character sentence whole; the autoregressive one, which
    stops at model.max_decoder_steps, has it cut at its comma, not between words."""
    root, cache, synth = setup
    assert len(LONG) == 200 and synth.cfg.model.decoder == "duration"
    assert synth.sentences(LONG) == [LONG] and synth.max_sentence_chars is None
    (said,) = synth.synthesize([LONG])
    assert said.parts == 1 and len(said.spoken) == 1
    cfg = load("tiny", ["model.decoder=autoregressive", "model.max_decoder_steps=500"])
    torch.manual_seed(0)
    ar = Synthesizer.of(XTTS(cfg.model, len(cache.vocab), cfg.audio.n_mels), cfg, synth.text, synth.to_wave)
    assert 100 < ar.max_sentence_chars < 200  # the cap at a slow reading rate
    comma = LONG.index(",") + 1
    assert ar.sentences(LONG) == [LONG[:comma], LONG[comma + 1:]]
    assert synth.sentences("Two sentences. Are two.") == ["two sentences.", "are two."]
