"""Training's periodic eval, `myxtts eval` without its extra, and the sentences it picks. The
command end to end (every figure, the page and its audio) runs in
tests/commands/test_every_command.py, on the run every command shares."""
import json
import shutil

import pytest

from myxtts import cli
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.prepare import prepare
from myxtts.errors import UserError
from myxtts.evaluate import metrics
from myxtts.evaluate.evaluation import DNSMOS, NEW_TEXT, ZERO_SHOT, plan, plan_texts
from myxtts.models.checkpoint import read_metadata, trained_voices
from myxtts.rundir import RunDir, resolve_checkpoint
from myxtts.text import phonemes_missing

from .conftest import FA, LJ, ROOT, multilingual_missing, train_tiny


def _records(run):
    return RunDir(run).read_metrics()


def test_training_logs_periodic_eval_without_changing_the_run(tiny_run, short_val_cache, tmp_path):
    run, stderr = tiny_run
    evals = [x for x in _records(run) if "eval_wer" in x]
    assert [x["step"] for x in evals] == [2]
    assert evals[0]["eval_wer_ground_truth"] <= 0.25 and evals[0]["eval_wer"] >= 0.9
    # naturalness too: the output's, and the recordings' and copy synthesis' (the first evaluation)
    assert all(1 <= evals[0][f"eval_{k}"] <= 5 for k in DNSMOS), evals[0]
    assert evals[0]["eval_dnsmos_ovrl_ground_truth"] > evals[0]["eval_dnsmos_ovrl"]
    assert "step 2: held-out WER" in stderr
    assert list((run / "tensorboard").glob("events.*"))
    # the step after an evaluation trains exactly as it would have without one
    train_tiny(short_val_cache, tmp_path / "plain", "train.max_steps=3")
    losses = [{x["step"]: x["loss"] for x in _records(r) if x.get("loss") is not None}
              for r in (run, tmp_path / "plain")]
    assert sorted(losses[0]) == [1, 2, 3] and losses[0] == losses[1]


def test_eval_scores_a_voice_the_model_never_heard_against_its_training_voices(tiny_run, tmp_path, capsys):
    run, _ = tiny_run
    assert trained_voices(read_metadata(resolve_checkpoint(run))) == ["speaker"]  # the LJ clips' voice
    periodic = [x for x in _records(run) if "eval_wer" in x][0]
    assert not any(f"eval_{k}" in periodic for k in ZERO_SHOT)  # its own cache: every voice heard
    # the LJSpeech clips it trained on, and two clips of a voice it never heard, one held out
    corpus, demo = tmp_path / "two", ROOT / "data" / "demo"
    shutil.copytree(LJ, corpus)
    rows = {line.split("|")[0]: line for line in (demo / "metadata.csv").read_text().splitlines()}
    for uid in ("spk5-0001", "spk5-0002"):
        shutil.copy(demo / "wavs" / f"{uid}.flac", corpus / "wavs")
        with open(corpus / "metadata.csv", "a") as f:
            f.write(rows[uid] + "\n")
    (corpus / "val.txt").write_text("LJ001-0002\nspk5-0002\n")
    prepare(corpus, tmp_path / "cache", load("tiny"), progress=False)
    assert cli.main(["eval", "--checkpoint", str(run), "--data", str(tmp_path / "cache"),
                     "--out", str(tmp_path / "eval")]) == 0
    capsys.readouterr()
    report = json.loads((tmp_path / "eval" / "eval.json").read_text())
    heard, unheard = sorted(report["per_sentence"], key=lambda r: r["speaker"] == "spk5")
    assert "zero_shot" not in heard and unheard["zero_shot"] is True
    assert unheard["nearest_trained_voice"] == "speaker"
    assert -1 <= unheard["speaker_cosine_nearest_trained"] <= 1
    assert report["zero_shot_speaker_cosine"] == pytest.approx(unheard["speaker_cosine"])
    assert report["zero_shot_nearest_trained_cosine"] == pytest.approx(unheard["speaker_cosine_nearest_trained"])
    nearer = unheard["speaker_cosine"] > unheard["speaker_cosine_nearest_trained"]
    assert report["zero_shot_identified"] == float(nearer)


def test_eval_speaks_new_sentences_and_scores_only_the_output(tiny_run, tmp_path, capsys):
    run, _ = tiny_run
    text = tmp_path / "new.txt"
    text.write_text("\nPrinting is an old art.\nThe river was cold.\n", encoding="utf-8")
    assert cli.main(["eval", "--checkpoint", str(run), "--sentences", str(text), "--limit", "1",
                     "--out", str(tmp_path / "eval")]) == 0
    out = capsys.readouterr()
    assert "1 new" in out.err and "not measured (new sentences" in out.out
    assert any(line.split() == ["language", "en-us"] for line in out.out.splitlines())
    report = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert report["sentences"] == 1 and report["split"] == "new" and report["sentences_file"] == str(text)
    assert report["languages"] == ["en-us"] and "by_language" not in report
    assert report["per_sentence"][0]["language"] == "en-us"
    assert [r["text"] for r in report["per_sentence"]] == ["Printing is an old art."]
    assert report["wer"] is not None and report["speaker_cosine"] is not None
    for key in ("wer_ground_truth", "wer_copy_synthesis", "dnsmos_ovrl_ground_truth", "duration_ratio"):
        assert report[key] is None and report["not_measured"][key] == NEW_TEXT, key
    row = report["per_sentence"][0]
    assert row["seconds_ground_truth"] is None and "wav_ground_truth" not in row
    assert (tmp_path / "eval" / row["wav"]).stat().st_size > 1000
    assert (tmp_path / "eval" / "eval.html").read_text().count("<audio") == 1
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    assert cli.main(["eval", "--checkpoint", str(run), "--sentences", str(empty), "--out", str(tmp_path / "e2")]) == 2
    assert "no text" in capsys.readouterr().err


@pytest.mark.parametrize("module, dist", [("faster_whisper", "faster-whisper"), ("speechmos", "speechmos")])
def test_without_the_extra_says_what_to_install(monkeypatch, capsys, tmp_path, module, dist):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    code = cli.main(["eval", "--checkpoint", str(tmp_path / "missing-run")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "pip install 'myxtts[eval]'" in err and dist in err


class _Index:  # the index columns plan() reads
    id = ["a1", "a2", "b1", "a3"]
    text = ["one", "two", "three", "four"]
    speaker = [0, 0, 1, 0]
    val = [0, 1, 0, 1]
    language = [0, 0, 0, 1]  # anna's last line is Persian


class _Cache:  # the parts of a Cache that plan() reads: two speakers, one with a held-out line
    path = "cache"
    index = _Index()
    speakers = ["anna", "ben"]
    languages = ["en-us", "fa"]

    def __len__(self):
        return 4

    def indices(self, split):
        return [i for i, v in enumerate(self.index.val) if v == (split == "val")]

    by_speaker = Cache.by_speaker  # the rules themselves, on these columns
    first_of_each_speaker = Cache.first_of_each_speaker
    language = Cache.language


def test_plan_picks_a_same_speaker_reference_and_another_speakers_control():
    sentences = plan(_Cache())
    assert [s.id for s in sentences] == ["a2", "a3"]
    assert all(s.ref == 0 for s in sentences)  # anna's training utterance, not the sentence itself
    assert all(s.other == 2 for s in sentences)  # ben's
    assert [s.language for s in sentences] == ["en-us", "fa"]  # each read in its own language
    assert plan(_Cache(), limit=1)[0].id == "a2"
    trained = plan(_Cache(), split="train")  # what the model heard, each with another reference
    assert [s.id for s in trained] == ["a1", "b1"]
    assert trained[0].ref != 0 and trained[0].other == 2 and trained[1].other == 0


class _PseudoCache(_Cache):  # anna again at 0.9 times her speed: a copy of her voice, no control
    speakers = ["anna", "anna~speed0.9", "ben"]

    class index:  # noqa: N801 - the attribute plan() reads
        id = ["a1", "a2", "p1", "b1"]
        text = ["one", "two", "three", "four"]
        speaker = [0, 0, 1, 2]
        val = [0, 1, 0, 0]
        language = [0, 0, 0, 0]


def test_plan_takes_the_control_from_another_recorded_voice_not_a_pseudo_speaker():
    (sentence,) = plan(_PseudoCache())
    assert sentence.id == "a2" and sentence.other == 3  # ben's, not anna~speed0.9's


def test_new_sentences_go_to_the_training_voices_in_turn():
    sentences = plan_texts(_Cache(), ["  ", "first", "second", "third"])
    assert [(s.id, s.text, s.speaker, s.index) for s in sentences] == [
        ("new-001", "first", "anna", None), ("new-002", "second", "ben", None), ("new-003", "third", "anna", None)]
    assert {s.language for s in sentences} == {None}  # new text is read in the model's language
    assert [(s.ref, s.other) for s in sentences] == [(0, 2), (2, 0), (0, 2)]  # training utterances
    assert len(plan_texts(_Cache(), ["a", "b", "c"], limit=2)) == 2
    with pytest.raises(UserError, match="no text"):
        plan_texts(_Cache(), ["", " "])


def test_the_bundled_new_sentences_are_in_none_of_the_demo_recordings():
    demo = ROOT / "data" / "demo"
    new = [t for t in (demo / "new_sentences.txt").read_text(encoding="utf-8").splitlines() if t.strip()]
    recorded = {cell.strip().lower() for line in (demo / "metadata.csv").read_text(encoding="utf-8").splitlines()
                for cell in line.split("|")[1:3]}
    assert len(new) == 20 and not [t for t in new if t.lower() in recorded]


def test_a_cache_of_two_languages_is_scored_in_each_and_over_all():
    from myxtts.evaluate.evaluation import summarize
    from myxtts.evaluate.report import language_lines
    from tests.evaluate.test_naturalness import _row

    rows = [_row(language="en-us", text="one two", transcript="one two"),
            _row(language="fa", text="سه چهار", transcript="سه"), _row(language="fa", text="پنج", transcript="پنج")]
    s = summarize(rows, load("tiny"))
    assert s["languages"] == ["en-us", "fa"] and s["wer"] == pytest.approx(1 / 5)  # over every sentence
    assert s["by_language"]["en-us"]["wer"] == 0 and s["by_language"]["en-us"]["sentences"] == 1
    assert s["by_language"]["fa"]["wer"] == pytest.approx(1 / 3) and s["by_language"]["fa"]["sentences"] == 2
    lines = dict(language_lines(s))
    assert lines["languages"] == "en-us, fa" and lines["WER, synthesized, fa (2 sentence(s))"] == "33.3 %"
    one = summarize(rows[:1], load("tiny"))
    assert one["languages"] == ["en-us"] and "by_language" not in one
    assert dict(language_lines(one)) == {"language": "en-us"}


def test_eval_hears_a_persian_cache_with_the_multilingual_recogniser_and_scores_it_in_persian(tmp_path, capsys):
    """An untrained Persian model (what it says is babble): the recording is what the test reads,
    heard by Whisper base in Persian and scored by the Persian normaliser (its ZWNJ a boundary)."""
    from tests.export.conftest import save_run

    if phonemes_missing() or multilingual_missing():
        pytest.skip(phonemes_missing() or multilingual_missing())
    corpus, held_out = tmp_path / "fa", "spk1-0098"  # "آنها ساعت شش عصر به باغ می‌روند."
    (corpus / "wavs").mkdir(parents=True)
    rows = {line.split("|")[0]: line for line in (FA / "metadata.csv").read_text(encoding="utf-8").splitlines()}
    chosen = ["spk1-0001", "spk2-0001", held_out]
    for uid in chosen:
        shutil.copy(FA / "wavs" / f"{uid}.flac", corpus / "wavs")
    (corpus / "metadata.csv").write_text("".join(rows[u] + "\n" for u in chosen), encoding="utf-8")
    (corpus / "val.txt").write_text(held_out + "\n")
    cfg = load("tiny", ["text.language=fa"])
    prepare(corpus, tmp_path / "cache", cfg, progress=False)
    run = save_run(tmp_path / "run", cfg, Cache(tmp_path / "cache").vocab)
    assert cli.main(["eval", "--checkpoint", str(run), "--data", str(tmp_path / "cache"),
                     "--out", str(tmp_path / "eval")]) == 0
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "eval" / "eval.json").read_text(encoding="utf-8"))
    assert report["languages"] == ["fa"] and list(report["asr"]) == ["fa"]  # English's model not asked for
    assert report["asr"]["fa"].endswith("whisper-base (beam 5, no retries, language fa)")
    assert "speech recogniser, fa" in printed and "whisper-base (beam 5, no retries, language fa)" in printed
    (row,) = report["per_sentence"]
    text, heard = row["text"], row["transcript_ground_truth"]
    assert "\u200c" in text and any("\u0600" <= c <= "\u06ff" for c in heard)  # heard in Persian letters
    assert report["cer_ground_truth"] == pytest.approx(metrics.cer([text], [heard], "fa"))
    assert report["cer_ground_truth"] < 0.9  # heard, if weakly: silence or English letters score 1 or more
    assert report["cer_ground_truth"] != pytest.approx(metrics.cer([text], [heard], "en-us"))
    assert row["cer"] == pytest.approx(metrics.char_errors(text, row["transcript"], "fa").rate)
