import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from myxtts import audio
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import prepare
from myxtts.data.verify import verify
from myxtts.errors import UserError
from tests.conftest import kill_when

from .messy import make_messy_corpus

LJ = Path(__file__).parent.parent / "fixtures" / "ljspeech"


def test_real_ljspeech_clips_prepare_unchanged(tmp_path):
    cfg = load()
    report = prepare(LJ, tmp_path / "c", cfg, progress=False)
    assert report["utterances"] == 8 and report["skipped"] == []
    cache = Cache(tmp_path / "c", expect=cfg)
    assert cache.index.id == [f"LJ001-000{i}" for i in range(1, 9)]
    # The stored mel is the direct computation, up to float16 storage.
    for i in (0, 5):
        wav = audio.preprocess(audio.load_audio(LJ / "wavs" / f"{cache.index.id[i]}.wav", 22050), cfg.audio)
        direct = audio.mel_spectrogram(wav, cfg.audio)
        np.testing.assert_allclose(cache.mel(i).astype(np.float32), direct, atol=1e-2, rtol=1e-3)
        assert cache.index.n_samples[i] == cache.index.n_frames[i] * cfg.audio.hop_length
        np.testing.assert_array_equal(cache.wav(i), np.round(wav * 32767).astype(np.int16))
    # "in being comparatively modern.", phonemized (the default text.mode)
    assert cache.vocab.symbols[cache.tokens(1)[0]] == "ɪ"
    assert abs(report["audio_hours"] * 3600 - cache.seconds()) < 1e-2


def test_messy_corpus_converts_every_good_clip_to_the_same_features(tmp_path):
    # Each bad line's reason is a row of test_bad_input_matrix.py.
    keep, bad = make_messy_corpus(tmp_path / "messy")
    report = prepare(tmp_path / "messy", tmp_path / "c", load(), progress=False)
    cache = Cache(tmp_path / "c")
    assert set(cache.index.id) == keep
    assert report["utterances"] == len(keep) and len(report["skipped"]) == len(bad)
    assert verify(tmp_path / "c") == []
    # 44.1 kHz, 16 kHz, stereo and 8-bit inputs were converted to the same clip.
    ref = cache.index.n_frames[cache.index.id.index("plain")]
    for uid in ("stereo", "hi44k", "lo16k", "eightbit", "asflac"):
        # 8-bit quantisation noise moves the trimmed edges by a few frames.
        assert abs(cache.index.n_frames[cache.index.id.index(uid)] - ref) <= 6, uid


def test_cli_exit_codes(tmp_path, myxtts_cmd):
    keep, _ = make_messy_corpus(tmp_path / "messy")
    ok = subprocess.run(myxtts_cmd + ["prepare", str(tmp_path / "messy"), "--out", str(tmp_path / "c"),
                                      "--workers", "2"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert f"prepared {len(keep)} utterances" in ok.stdout and "corrupt" in ok.stdout
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "metadata.csv").write_text("a|missing audio\n")
    none = subprocess.run(myxtts_cmd + ["prepare", str(tmp_path / "nothing"), "--out",
                                        str(tmp_path / "c2")], capture_output=True, text=True)
    assert none.returncode == 2 and "Traceback" not in none.stderr
    assert f"no usable utterances in {tmp_path / 'nothing'}: all 1 skipped (1 audio not found)" \
        in none.stderr and len(none.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c2" / "meta.json").exists()  # nothing takes it for a usable cache
    with pytest.raises(UserError, match="0 utterances"):
        Cache(tmp_path / "c2")


def _snapshot(cache: Path) -> dict:
    files = {p.relative_to(cache).as_posix(): p.read_bytes() for p in sorted(cache.rglob("*"))
             if p.is_file() and p.name not in ("report.json", "recipe.json")}
    report = json.loads((cache / "report.json").read_text())
    report.pop("timing", None)
    files["report"] = report
    return files


def test_killed_prepare_resumes_to_an_identical_cache(tmp_path, myxtts_cmd):
    args = ["prepare", str(LJ), "--workers", "1", "--chunk-size", "2"]
    subprocess.run(myxtts_cmd + args + ["--out", str(tmp_path / "whole")], check=True,
                   capture_output=True)
    proc = subprocess.Popen(myxtts_cmd + args + ["--out", str(tmp_path / "killed")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = tmp_path / "killed" / "shards" / "00000"
    kill_when(proc, first, timeout_s=120, poll_s=0.005)
    assert not (tmp_path / "killed" / "meta.json").exists() or proc.returncode == 0
    with pytest.raises(UserError, match="no meta.json"):
        Cache(tmp_path / "killed")
    subprocess.run(myxtts_cmd + args + ["--out", str(tmp_path / "killed")], check=True,
                   capture_output=True)
    assert _snapshot(tmp_path / "killed") == _snapshot(tmp_path / "whole")


def test_shards_across_machines_merge_to_the_same_cache(tmp_path):
    cfg = load()
    whole = prepare(LJ, tmp_path / "whole", cfg, chunk_size=2, progress=False)
    assert prepare(LJ, tmp_path / "split", cfg, chunk_size=2, shard=(1, 2), progress=False) is None
    merged = prepare(LJ, tmp_path / "split", cfg, chunk_size=2, shard=(0, 2), progress=False)
    assert merged["utterances"] == whole["utterances"]
    assert _snapshot(tmp_path / "split") == _snapshot(tmp_path / "whole")


def test_other_settings_are_refused_naming_the_difference(tmp_path):
    prepare(LJ, tmp_path / "c", load(), progress=False)
    other = load(None, ["audio.sample_rate=16000"])
    with pytest.raises(UserError, match="audio.sample_rate: cache has 22050, requested 16000"):
        prepare(LJ, tmp_path / "c", other, progress=False)
    with pytest.raises(UserError, match="audio.sample_rate"):
        Cache(tmp_path / "c", expect=other)


def test_multispeaker_csv_and_vctk_layouts(tmp_path):
    import shutil

    csv_root = tmp_path / "csvcorpus"
    (csv_root / "audio").mkdir(parents=True)
    rows = ["audio_file|text|speaker_name"]
    for i in range(1, 5):
        shutil.copy(LJ / "wavs" / f"LJ001-000{i}.wav", csv_root / "audio" / f"u{i}.wav")
        rows.append(f"audio/u{i}.wav|Sentence number {i}.|{'alice' if i % 2 else 'bob'}")
    (csv_root / "list.csv").write_text("\n".join(rows) + "\n")
    report = prepare(csv_root, tmp_path / "c1", load(), progress=False)
    cache = Cache(tmp_path / "c1")
    assert report["utterances"] == 4 and cache.speakers == ["alice", "bob"]
    assert [cache.speakers[s] for s in cache.index.speaker] == ["alice", "bob", "alice", "bob"]

    vctk = tmp_path / "vctk"
    for spk in ("p225", "p226"):
        (vctk / "wav48" / spk).mkdir(parents=True)
        (vctk / "txt" / spk).mkdir(parents=True)
        for i in (1, 2):
            shutil.copy(LJ / "wavs" / f"LJ001-000{i + 1}.wav", vctk / "wav48" / spk / f"{spk}_00{i}.wav")
            (vctk / "txt" / spk / f"{spk}_00{i}.txt").write_text(f"Speaker {spk} line {i}.")
    report = prepare(vctk, tmp_path / "c2", load(), progress=False)
    assert report["utterances"] == 4 and Cache(tmp_path / "c2").speakers == ["p225", "p226"]


def _lj_rows():
    """(id, normalized text) of the LJSpeech fixture, in order."""
    rows = []
    for line in (LJ / "metadata.csv").read_text(encoding="utf-8").splitlines():
        cols = line.split("|")
        rows.append((cols[0], cols[2] or cols[1]))
    return rows


def test_libritts_layout_reads_the_normalized_text_and_reports_what_it_cannot_use(tmp_path):
    import shutil

    from myxtts.data.corpus import read_corpus

    root = tmp_path / "LibriTTS" / "train-clean-100"
    rows = _lj_rows()
    for i, (uid, text) in enumerate(rows):
        chapter = root / ("19" if i < 4 else "26") / "198"
        chapter.mkdir(parents=True, exist_ok=True)
        shutil.copy(LJ / "wavs" / f"{uid}.wav", chapter / f"{uid}.wav")
        if i == 5:  # a chapter that keeps its text only in the .trans.tsv
            (chapter / "26_198.trans.tsv").write_text(f"{uid}\t{text.upper()}\t{text}\n")
            continue
        if i == 6:
            continue  # no transcript at all
        (chapter / f"{uid}.normalized.txt").write_text(text)
        (chapter / f"{uid}.original.txt").write_text(text.upper())
    chapter = root / "26" / "198"  # transcripts whose clips are gone
    (chapter / "26_198_000001.normalized.txt").write_text("a transcript without its clip")
    with (chapter / "26_198.trans.tsv").open("a") as f:
        f.write("26_198_000002\tGONE TOO\tgone too\n")
    utts, problems, fmt = read_corpus(tmp_path / "LibriTTS")
    assert fmt == "libritts"
    want = [(uid, text) for i, (uid, text) in enumerate(rows) if i != 6]
    assert sorted((u.id, u.text) for u in utts) == sorted(want)  # normalized, not the original
    assert {u.speaker for u in utts} == {"19", "26"}
    bad = {p.id: p.reason for p in problems if not p.kept}
    assert sorted(bad) == sorted([rows[6][0], "26_198_000001", "26_198_000002"])
    assert "no transcript found" in bad[rows[6][0]]
    assert bad["26_198_000001"] == ("train-clean-100/26/198/26_198_000001.normalized.txt: audio not "
                                    "found (26_198_000001.wav/.flac)")
    assert bad["26_198_000002"].startswith("train-clean-100/26/198/26_198.trans.tsv:2: audio not found")
    (note,) = [p for p in problems if p.kept]  # the report says which text was read
    assert "read the normalized text" in note.reason and "had only" not in note.reason

    report = prepare(tmp_path / "LibriTTS", tmp_path / "cache", load(), progress=False)
    assert report["utterances"] == len(want) and Cache(tmp_path / "cache").speakers == ["19", "26"]
    assert {"26_198_000001", "26_198_000002"} <= {x["id"] for x in report["skipped"]}
    assert any("read the normalized text" in n["reason"] for n in report["notes"])


def test_jsonl_manifest_round_trips_the_ljspeech_fixture_and_reports_bad_lines(tmp_path):
    import json
    import shutil

    from myxtts.data.corpus import read_corpus

    root = tmp_path / "nemo"
    (root / "audio").mkdir(parents=True)
    lines = []
    for uid, text in _lj_rows():
        shutil.copy(LJ / "wavs" / f"{uid}.wav", root / "audio" / f"{uid}.wav")
        lines.append(json.dumps({"audio_filepath": f"audio/{uid}.wav", "text": text, "duration": 1.0,
                                 "speaker": 92}))
    lines += ['{"audio_filepath": "audio/missing.wav", "text": "gone"}',
              '{"audio_filepath": "../outside.wav", "text": "escapes"}',
              '{"text": "no audio path"}',
              '{not json',
              lines[0]]  # a repeat
    (root / "train_manifest.jsonl").write_text("\n".join(lines) + "\n")
    utts, problems, fmt = read_corpus(root)
    lj, _, _ = read_corpus(LJ)
    assert fmt == "jsonl"
    assert [(u.id.removeprefix("audio_"), u.text) for u in utts] == [(u.id, u.text) for u in lj]
    assert {u.speaker for u in utts} == {"92"}
    reasons = [p.reason for p in problems]
    assert len(reasons) == 5, reasons
    for line, why in ((9, "audio not found"), (10, "escapes the dataset folder"), (11, "expected an object"),
                      (12, "not JSON"), (13, "duplicate utterance id")):
        assert any(why in r and (f":{line}:" in r or why == "duplicate utterance id") for r in reasons), (why, reasons)

    # The manifest given as the corpus itself, as NeMo users pass it, on the command line.
    from myxtts.cli import main

    assert main(["prepare", str(root / "train_manifest.jsonl"), "--out", str(tmp_path / "cache")]) == 0
    assert sorted(Cache(tmp_path / "cache").index.id) == sorted(u.id for u in utts)


def test_pseudo_speeds_alternate_slower_and_faster():
    from myxtts.data.prepare import pseudo_speeds

    assert pseudo_speeds(0) == []
    assert pseudo_speeds(4) == [0.9, 1.1, 0.8, 1.2]


def _two_voice_corpus(root: Path, voices=((2, "a"), (4, "a"), (6, "a"), (8, "b"), (5, "b"), (7, "b"))) -> Path:
    """LJSpeech clips ``LJ001-000n`` as voices 'a' and 'b' (the metadata's 4th column); no val.txt,
    so the held-out ones are the hash pick."""
    import shutil

    rows = {line.split("|")[0]: line for line in (LJ / "metadata.csv").read_text().splitlines()}
    (root / "wavs").mkdir(parents=True)
    lines = []
    for n, spk in voices:
        uid = f"LJ001-000{n}"
        shutil.copy(LJ / "wavs" / f"{uid}.wav", root / "wavs")
        lines.append(f"{rows[uid]}|{spk}")
    (root / "metadata.csv").write_text("\n".join(lines) + "\n")
    return root


def test_pseudo_speakers_copy_every_training_clip_at_each_speed(tmp_path):
    root = _two_voice_corpus(tmp_path / "corpus")
    split = ["data.val_fraction=0.34"]  # 2 of the 6 real clips held out
    prepare(root, tmp_path / "plain", load(None, split), progress=False)
    report = prepare(root, tmp_path / "pseudo", load(None, split + ["data.pseudo_speakers=2"]), progress=False)
    plain, cache = Cache(tmp_path / "plain"), Cache(tmp_path / "pseudo")
    assert plain.speakers == ["a", "b"]
    assert cache.speakers == ["a", "a~speed0.9", "a~speed1.1", "b", "b~speed0.9", "b~speed1.1"]
    # validation hears the same real clips, however many copies were added
    held_out = [plain.index.id[i] for i in plain.indices("val")]
    assert len(held_out) == 2 and [cache.index.id[i] for i in cache.indices("val")] == held_out
    assert report["val_utterances"] == 2
    frames = dict(zip(cache.index.id, cache.index.n_frames.tolist()))
    speaker = {u: cache.speakers[s] for u, s in zip(cache.index.id, cache.index.speaker)}
    train = {cache.index.id[i] for i in cache.indices("train")}
    originals = [u for u in plain.index.id if u not in held_out]
    assert len(cache) == 6 + 2 * len(originals) and report["utterances"] == len(cache)
    for uid in plain.index.id:
        assert frames[uid] == plain.index.n_frames[plain.index.id.index(uid)]  # the originals unchanged
        for speed in (0.9, 1.1):
            copy = f"{uid}~speed{speed:g}"
            if uid in held_out:
                assert copy not in frames  # no held-out clip is heard in training, at any speed
                continue
            assert speaker[copy] == f"{speaker[uid]}~speed{speed:g}" and copy in train
            # the whole clip plays `speed` times as fast: trimming moves its edges by a frame or so
            assert abs(frames[copy] - frames[uid] / speed) <= 3, (copy, frames[copy], frames[uid])
    pseudo = [u for u in cache.index.id if "~speed" in u]
    assert len(pseudo) == 2 * len(originals) and set(pseudo) <= train  # copies are all training clips
    assert verify(tmp_path / "pseudo") == []


def test_a_clip_skipped_at_the_audio_pass_does_not_leak_a_held_out_clip_into_training(tmp_path):
    import hashlib

    root = _two_voice_corpus(tmp_path / "corpus", ((2, "a"), (4, "a"), (5, "b"), (7, "b")))
    # two unreadable clips whose ids the hash pick ranks before every real one
    first = min(hashlib.sha1(f"LJ001-000{n}".encode()).hexdigest() for n in (2, 4, 5, 7))
    bad = [b for b in (f"bad{k}" for k in range(1000)) if hashlib.sha1(b.encode()).hexdigest() < first][:2]
    for b in bad:
        (root / "wavs" / f"{b}.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk" * 4)
    with (root / "metadata.csv").open("a") as f:
        f.writelines(f"{b}|A corrupt clip.|A corrupt clip.|a\n" for b in bad)
    prepare(root, tmp_path / "c", load(None, ["data.val_fraction=0.5", "data.pseudo_speakers=1"]), progress=False)
    cache = Cache(tmp_path / "c")
    held_out = {cache.index.id[i] for i in cache.indices("val")}
    copied = {u.split("~")[0] for u in cache.index.id if "~speed" in u}
    real_train = {cache.index.id[i] for i in cache.indices("train")} - {u for u in cache.index.id if "~" in u}
    # the pick is made once, over the clips listed: the unreadable ones take their share of it
    assert held_out and not held_out & copied and real_train == copied


def test_on_the_fly_mode_refuses_a_cache_with_pseudo_speakers():
    from myxtts.data.features import features_for

    class _Cache:  # the parts features_for reads
        path, speakers = "cache", ["a", "a~speed0.9"]

    with pytest.raises(UserError, match="on_the_fly=false"):
        features_for(_Cache(), load(None, ["data.on_the_fly=true"]))
