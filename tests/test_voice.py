"""One rule per way a voice is given: a folder of clips is the same voice wherever it is named,
and a cache's speakers are their first utterances, a voice held out whole included and said."""
import shutil
from pathlib import Path

import numpy as np
import torch

from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import prepare
from myxtts.export.piper import folder_voice
from myxtts.speak import reference_from_file
from myxtts.voice import HELD_OUT_SPEAKER, TRAINING_SPEAKER, cache_voices, folder_voices, from_folder

ROOT = Path(__file__).resolve().parents[1]
VOICES = ROOT / "tests" / "fixtures" / "reference_voices"
CLIPS = ["arctic_a0007_male.wav", "arctic_a0009_slt_female.wav"]


def test_a_folder_is_its_clips_joined_and_a_bad_clip_is_skipped_with_a_note(tmp_path):
    cfg = load("tiny", ["data.ref_seconds=6"])  # long enough to hear both clips
    for name in CLIPS:
        shutil.copy(VOICES / name, tmp_path)
    (tmp_path / "broken.wav").write_bytes(b"not audio")
    said = []
    voice = from_folder("two", tmp_path, cfg, said.append)
    first, second = (reference_from_file(tmp_path / n, cfg) for n in CLIPS)
    joined = torch.cat([first.mel, second.mel])[:voice.reference.frames]
    assert voice.name == "two" and voice.reference.frames > first.frames
    assert torch.equal(voice.reference.mel, joined)
    assert len(said) == 1 and "broken.wav" in said[0] and "clip skipped" in said[0]
    (tmp_path / "empty").mkdir()
    assert from_folder("none", tmp_path / "empty", cfg, said.append) is None and "no usable clip" in said[-1]


def test_the_same_folder_is_the_same_voice_in_serve_synthesize_and_export(tmp_path):
    from myxtts.infer import Synthesizer

    cfg = load("tiny")
    folder = tmp_path / "voices" / "pair"
    folder.mkdir(parents=True)
    for name in CLIPS:
        shutil.copy(VOICES / name, folder)
    (served,) = folder_voices(tmp_path / "voices", cfg, print)
    exported = folder_voice("pair", folder, cfg, print)
    synth = Synthesizer.__new__(Synthesizer)  # its reference rule alone, without a model to load
    synth.cfg, synth.log = cfg, print
    synthesized = synth.reference(folder)
    assert torch.equal(served.reference.mel, exported.reference.mel)
    assert torch.equal(served.reference.mel, synthesized.mel)


def test_a_cache_gives_each_speaker_its_first_utterance_and_language_a_held_out_voice_said(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(ROOT / "tests" / "fixtures" / "ljspeech", corpus)
    rows = (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines()
    ids = [r.split("|")[0] for r in rows]
    # the last two clips as another speaker, held out whole
    cols = [(r.split("|") + [""] * 3)[:3] for r in rows]
    (corpus / "metadata.csv").write_text("".join("|".join(c + (["other", "de"] if k >= len(ids) - 2 else ["lj"])) + "\n"
                                                 for k, c in enumerate(cols)), encoding="utf-8")
    (corpus / "val.txt").write_text(f"{ids[1]}\n{ids[-2]}\n{ids[-1]}\n")
    cfg = load("tiny")
    prepare(corpus, tmp_path / "cache", cfg, progress=False)
    cache = Cache(tmp_path / "cache")
    voices = {v.name: v for v in cache_voices(cache, cfg)}
    assert set(voices) == set(cache.speakers)
    for s, i in cache.first_of_each_speaker().items():
        v = voices[cache.speakers[s]]
        assert np.array_equal(v.reference.mel.numpy(), np.asarray(cache.mel(i), np.float32)[:v.reference.frames])
        assert v.source == (TRAINING_SPEAKER if cache.speakers[s] in cache.voices("train") else HELD_OUT_SPEAKER)
    assert sorted(v.source for v in voices.values()) == sorted([TRAINING_SPEAKER, HELD_OUT_SPEAKER])
    assert (voices["lj"].language, voices["other"].language) == ("en-us", "de")  # what its clips were read in
