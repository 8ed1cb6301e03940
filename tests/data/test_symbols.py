"""Language in the data: each corpus format names an utterance's language, prepare reads each
utterance in it, and the cache and its report record the languages (data/symbols.py)."""
import json
import shutil
from pathlib import Path

import pytest

from myxtts.cli import main
from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.cachedir import CacheDir
from myxtts.data.corpus import read_corpus
from myxtts.data.prepare import prepare
from myxtts.data.symbols import Match
from myxtts.data.verify import verify
from myxtts.text import EOS, PAD, Vocabulary

LJ = Path(__file__).parent.parent / "fixtures" / "ljspeech"
CHARS = ["text.mode=characters"]  # the readers alone: what a language changes before espeak-ng
# (text, its language, what the cache's tokens say): one row per language, one naming none
ROWS = [("3 books.", "en-us", "three books."),
        ("۳ کتاب.", "fa", "سه کتاب."),
        ("2 Bücher.", "de", "zwei bücher."),
        ("4 pages.", None, "four pages.")]


def _wavs(root: Path, folder: str) -> list[str]:
    """One fixture clip per row of ROWS under ``root/folder``; their ids."""
    (root / folder).mkdir(parents=True)
    ids = [f"u{i}" for i in range(len(ROWS))]
    for i, uid in enumerate(ids):
        shutil.copy(LJ / "wavs" / f"LJ001-000{i + 2}.wav", root / folder / f"{uid}.wav")
    return ids


def _ljspeech(root: Path) -> None:
    ids = _wavs(root, "wavs")
    (root / "metadata.csv").write_text("".join(
        f"{uid}|{text}|{text}|anna" + (f"|{lang}" if lang else "") + "\n"
        for uid, (text, lang, _) in zip(ids, ROWS)), encoding="utf-8")


def _csv(root: Path) -> None:
    ids = _wavs(root, "audio")
    rows = ["audio_file|language|text"] + [f"audio/{uid}.wav|{lang or ''}|{text}"
                                           for uid, (text, lang, _) in zip(ids, ROWS)]
    (root / "list.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def _jsonl(root: Path) -> None:
    ids = _wavs(root, "audio")
    lines = [json.dumps({"audio_filepath": f"audio/{uid}.wav", "text": text,
                         **({"language": lang} if lang else {})}, ensure_ascii=False)
             for uid, (text, lang, _) in zip(ids, ROWS)]
    (root / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _said(cache: Cache, i: int) -> str:
    return "".join(cache.vocab.symbols[t] for t in cache.tokens(i)[:-1])  # end of sentence cut


@pytest.mark.parametrize("make", [_ljspeech, _csv, _jsonl])
def test_each_format_names_a_language_per_utterance_and_prepare_reads_each_in_it(tmp_path, make):
    make(tmp_path / "corpus")
    utts, problems, _ = read_corpus(tmp_path / "corpus")
    assert problems == [] and [u.language for u in utts] == [lang for _, lang, _ in ROWS]

    report = prepare(tmp_path / "corpus", tmp_path / "c", load(None, CHARS), progress=False)
    cache = Cache(tmp_path / "c")
    assert cache.languages == ["de", "en-us", "fa"]  # a row naming none: text.language, en-us
    by_id = {uid: i for i, uid in enumerate(cache.index.id)}
    for uid, (_, lang, said) in zip(sorted(by_id), ROWS):
        assert cache.language(by_id[uid]) == (lang or "en-us")
        assert _said(cache, by_id[uid]) == said  # its numbers in its own words
    # The report counts each language's utterances and seconds, as the cache holds them.
    frames = {lang: [cache.index.n_frames[i] for i in range(len(cache)) if cache.language(i) == lang]
              for lang in cache.languages}
    assert report["languages"] == {lang: {"utterances": len(f), "audio_seconds": pytest.approx(
        sum(f) * cache.audio_cfg.hop_length / cache.audio_cfg.sample_rate, abs=1e-3)}
        for lang, f in frames.items()}
    assert report["languages"]["en-us"]["utterances"] == 2


def test_prepare_language_reads_the_rows_that_name_none_in_it(tmp_path, capsys):
    _ljspeech(tmp_path / "corpus")
    assert main(["prepare", str(tmp_path / "corpus"), "--out", str(tmp_path / "c"), "--workers", "1",
                 "--language", "fa", *CHARS]) == 0
    cache = Cache(tmp_path / "c")
    assert cache.text_cfg.language == "fa"  # the cache's language, what a model trained on it reads
    assert [cache.language(i) for i in range(len(cache))] == ["en-us", "fa", "de", "fa"]
    assert _said(cache, 3) == "چهار pages."  # the row naming none: its number in Persian
    assert "de: 1 utterances" in capsys.readouterr().out
    report = json.loads((tmp_path / "c" / "report.json").read_text())
    assert {lang: n["utterances"] for lang, n in report["languages"].items()} == {"de": 1, "en-us": 1, "fa": 2}


def test_an_unknown_language_code_is_one_line_naming_it(tmp_path, capsys):
    _ljspeech(tmp_path / "corpus")
    meta = tmp_path / "corpus" / "metadata.csv"
    meta.write_text(meta.read_text(encoding="utf-8").replace("|de\n", "|xx-klingon\n"), encoding="utf-8")
    # A row: that utterance is skipped and named; the rest is prepared.
    report = prepare(tmp_path / "corpus", tmp_path / "c", load(None, CHARS), progress=False)
    assert report["utterances"] == 3 and [s["id"] for s in report["skipped"]] == ["u2"]
    reason = report["skipped"][0]["reason"]
    assert "unknown language code 'xx-klingon'" in reason and "\n" not in reason
    # The whole corpus: one line, and nothing prepared.
    rc = main(["prepare", str(tmp_path / "corpus"), "--out", str(tmp_path / "c2"), "--language", "xx",
               *CHARS])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "unknown language code 'xx'" in err
    assert not (tmp_path / "c2" / "meta.json").exists()


def test_a_cache_prepared_before_languages_reads_as_one_of_its_text_language(tmp_path):
    prepare(LJ, tmp_path / "c", load(None, [*CHARS, "text.language=en-gb"]), progress=False)
    meta, index = (json.loads((tmp_path / "c" / f).read_text()) for f in ("meta.json", "index.json"))
    del meta["languages"], index["language"]  # as caches were written before them
    for name, d in (("meta.json", meta), ("index.json", index)):
        (tmp_path / "c" / name).write_text(json.dumps(d))
    cache = Cache(tmp_path / "c")
    assert cache.languages == ["en-gb"] and {cache.language(i) for i in range(len(cache))} == {"en-gb"}
    assert verify(tmp_path / "c") == []


def _ids(cache: Cache) -> dict:
    return {cache.index.id[i]: cache.tokens(i).tolist() for i in range(len(cache))}


def test_cache_verify_fix_mends_a_matched_cache_with_its_own_vocabulary(tmp_path, capsys):
    """A ``prepare --match`` cache: the model's symbols first, the new language's appended, and
    the model's language read in its symbols (no 'h': 'three' is skipped). --fix prepares the
    damaged shard again with that vocabulary, not one built from the corpus."""
    _ljspeech(tmp_path / "corpus")
    model = Match(Vocabulary([PAD, EOS] + list(" .abcdefgiknoprstuwz")), "en-us")
    cache = tmp_path / "c"
    report = prepare(tmp_path / "corpus", cache, load(None, CHARS), chunk_size=1, progress=False,
                     match=model)
    before = Cache(cache)
    assert [s["id"] for s in report["skipped"]] == ["u0"]  # 'three books.' in the model's language
    assert before.vocab.symbols[:len(model.vocab)] == model.vocab.symbols
    assert before.vocab.symbols != Vocabulary.build(before.vocab.symbols).symbols  # not a plain one
    damaged = CacheDir(cache).shard_array(CacheDir.shard_name(0), "tokens")  # the Persian row's shard
    data = bytearray(damaged.read_bytes())
    data[-2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    assert verify(cache) == [("00000", "tokens.npy checksum mismatch (corrupted)")]

    assert main(["cache", "verify", str(cache), "--fix", "--workers", "1"]) == 0
    assert "repaired, OK" in capsys.readouterr().out
    after = Cache(cache)
    assert after.vocab == before.vocab and _ids(after) == _ids(before)

    # A cache prepared with --match before its recipe recorded the model: one line, nothing deleted.
    recipe = json.loads((cache / "recipe.json").read_text())
    del recipe["match"]
    (cache / "recipe.json").write_text(json.dumps(recipe))
    damaged.write_bytes(bytes(data))
    assert main(["cache", "verify", str(cache), "--fix", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "before caches recorded the matched model" in err
    assert damaged.read_bytes() == bytes(data) and verify(cache)[0][0] == "00000"
