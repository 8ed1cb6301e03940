"""The exported voice computes what MyXTTS speaks, and Piper's own loader reads it."""
import json

import numpy as np
import pytest

from myxtts import speak
from myxtts.data.cache import Cache
from myxtts.export.phonemes import build
from myxtts.export.piper import export, run_onnx, session
from myxtts.infer import Synthesizer
from myxtts.text import TextProcessor, Vocabulary

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def exported(voice_run, clone_folder, tmp_path_factory):
    """The run's voices: the cache's one speaker, a clone from a folder and neutral (so a sid)."""
    run, cache = voice_run
    out = tmp_path_factory.mktemp("voice") / "lj.onnx"
    said = []
    done = export(run, out, data=cache, voices=[f"slt={clone_folder}"], say=said.append)
    return done, said


@pytest.fixture(scope="module")
def synth(voice_run):
    return Synthesizer(voice_run[0], device="cpu", log=lambda _: None)


def test_what_it_says_it_wrote(exported):
    done, said = exported
    assert done.onnx.is_file() and done.config == done.onnx.with_name("lj.onnx.json")
    assert [v.name for v in done.voices] == ["speaker", "slt", "neutral"]  # as serve lists them
    assert any(line.startswith("weights: ") and "the newest checkpoint" in line for line in said)
    assert any(line.startswith("phoneme map coverage: 100.0 %") and "2 held-out" in line for line in said), said
    # the export's own check: the graph in onnxruntime against synthesize()
    assert done.mel_mae < 1e-3 and done.wav_max_diff < 1e-3


@pytest.mark.parametrize("sid", [0, 1])
@pytest.mark.parametrize("scale", [0.8, 1.0, 1.25])
def test_onnx_speaks_as_pytorch_speaks(exported, synth, clone_folder, voice_run, sid, scale):
    """The same text, voice and pace (a served or synthesized ``speed`` of 1 / length_scale): the
    same frames, the same mel (mean absolute error well under 1e-3) and the same audio (largest
    sample difference under 1e-4), and frames per id that add up."""
    done, _ = exported
    cfg = synth.cfg
    ref = (speak.reference_from_mel(Cache(voice_run[1]).mel(0), cfg) if sid == 0 else
           synth.reference(clone_folder))  # the folder's voice, as synthesize and serve make it
    text = TextProcessor(cfg.text, Vocabulary(synth.text.vocab.symbols))
    pmap = build(text.vocab.symbols)
    ids = pmap.ids_of_tokens(text.encode(SENTENCE, warn=lambda _: None))
    wav, durations, mel = run_onnx(session(done.onnx), ids, sid, length_scale=scale)
    (spoken,) = synth.speak_ids([synth.encode(SENTENCE)], ref, speed=1 / scale)
    assert mel.shape == tuple(spoken.mel.shape) and mel.shape[0] * cfg.audio.hop_length == wav.size
    assert np.abs(mel - spoken.mel.numpy()).mean() < 1e-3
    assert np.abs(wav - np.clip(spoken.wav, -1, 1)).max() < 1e-4
    assert durations.sum() == mel.shape[0] and durations[0] == durations[1] == 0  # BOS, pad
    assert (durations[2::2][:-1] >= 1).all() and (durations[1::2] == 0).all()  # each phoneme, then a pad
    if scale == 1.0:  # and what `myxtts synthesize` writes
        (res,) = synth.synthesize([SENTENCE], voice=ref)
        assert res.wav.size == wav.size and np.abs(wav - np.clip(res.wav, -1, 1)).max() < 1e-4


@pytest.mark.parametrize("scale", [0.8, 1.25])
def test_a_served_speed_is_the_exported_length_scale_of_that_pace(exported, synth, clone_folder, scale):
    """The server's engine asked for speed 1 / length_scale speaks the frames the export speaks,
    and, joined from its streamed pieces, the same audio."""
    import asyncio

    from myxtts.serve.engine import Engine
    from myxtts.voice import Voice

    done, _ = exported
    ref = synth.reference(clone_folder)
    pmap = build(synth.text.vocab.symbols)
    wav, _, mel = run_onnx(session(done.onnx), pmap.ids_of_tokens(synth.text.encode(SENTENCE)), 1, scale)
    engine = Engine(synth, max_batch=2, max_jobs=2, log=lambda _: None)
    try:
        async def served():
            job = engine.submit(Voice("slt", "voices folder", speak.with_latents(synth.model, ref)), 1 / scale,
                                engine.sentences(SENTENCE))
            out = []
            while not out or out[-1].kind not in ("done", "error"):
                out.append(await asyncio.wait_for(job.events.get(), 120))
            return out

        events = asyncio.run(served())
    finally:
        engine.stop()
    assert events[-1].kind == "done"
    heard = np.concatenate([e.wav for e in events if e.kind == "audio"])
    assert heard.size == wav.size == mel.shape[0] * synth.cfg.audio.hop_length
    assert np.abs(heard - wav).max() < 1e-3


def test_length_scale_stretches_the_durations(exported):
    done, _ = exported
    sess = session(done.onnx)
    ids = json.loads(done.config.read_text())["phoneme_id_map"]
    sentence = [ids["^"][0], 0] + [x for p in "ðə kwˈɪk bɹˈaʊn fˈɑːks." for x in (ids[p][0], 0)] + [ids["$"][0]]
    _, d1, _ = run_onnx(sess, sentence, 0)
    _, d2, _ = run_onnx(sess, sentence, 0, length_scale=2.0)
    assert 1.8 < d2.sum() / d1.sum() < 2.2


def test_piper_loads_the_voice_and_speaks_with_alignments(exported):
    piper = pytest.importorskip("piper")  # piper-tts: a test dependency (the dev extra)
    from piper.config import PiperConfig

    done, _ = exported
    raw = json.loads(done.config.read_text(encoding="utf-8"))
    cfg = PiperConfig.from_dict(raw)
    assert cfg.num_speakers == 3 and cfg.speaker_id_map == {"speaker": 0, "slt": 1, "neutral": 2}
    assert cfg.sample_rate == 22050 and cfg.hop_length == 256 and cfg.espeak_voice == "en-us"
    assert cfg.phoneme_type.value == "espeak" and cfg.num_symbols == len(set(i for v in cfg.phoneme_id_map.values()
                                                                              for i in v))
    assert cfg.phoneme_id_map["_"] == [0] and cfg.phoneme_id_map["^"] == [1] and cfg.phoneme_id_map["$"] == [2]
    assert raw["language"]["code"] == "en_US" and raw["dataset"] == "run"

    voice = piper.PiperVoice.load(done.onnx)
    chunks = list(voice.synthesize("In being comparatively modern.", include_alignments=True))
    assert len(chunks) == 1
    chunk = chunks[0]
    assert chunk.sample_rate == 22050 and chunk.audio_float_array.size > 0
    assert chunk.phoneme_alignments is not None  # the durations output, read as Piper reads alignments
    assert sum(a.num_samples for a in chunk.phoneme_alignments) == chunk.audio_float_array.size


def test_a_persian_model_exports_a_voice_piper_reads_in_persian(persian_run, tmp_path):
    piper = pytest.importorskip("piper")
    from myxtts.export.phonemes import piper_phonemizer
    from tests.export.conftest import PERSIAN

    said = []
    done = export(persian_run, tmp_path / "fa.onnx", say=said.append)
    raw = json.loads(done.config.read_text(encoding="utf-8"))
    assert raw["espeak"] == {"voice": "fa"} and raw["language"]["code"] == "fa"
    assert done.mel_mae < 1e-3  # checked on a Persian sentence, every phoneme of it known
    voice = piper.PiperVoice.load(done.onnx)
    assert voice.config.espeak_voice == "fa"
    (chunk,) = list(voice.synthesize(PERSIAN[2]))
    assert chunk.audio_float_array.size > 0 and chunk.sample_rate == 22050
    # Piper's runtime read it in Persian: its phonemes are espeak-ng's Persian ones, all in the map
    assert chunk.phonemes == piper_phonemizer("fa")(PERSIAN[2]) != piper_phonemizer("en-us")(PERSIAN[2])
    assert set(chunk.phonemes) <= set(raw["phoneme_id_map"])
