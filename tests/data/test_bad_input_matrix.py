"""Bad input and damaged files, one row each: what the user gets must stay a clear one-line
message naming the file (and line, or shard) and the fix, never a traceback or a silent NaN.

Rows: corpus lines and clips (tests/data/messy.py), text encodings of the metadata file,
damage to a prepared cache, a corpus with nothing usable, non-finite features, and the
permissions of what MyXTTS writes. Stop signals are tested in test_workers.py.
"""
import codecs
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from myxtts.config import load
from myxtts.data.cache import Cache
from myxtts.data.corpus import read_corpus
from myxtts.data.device import BatchStream
from myxtts.data.loader import make_loader
from myxtts.data.prepare import prepare, repair
from myxtts.data.verify import check_structure, verify
from myxtts.errors import UserError
from myxtts.models.checkpoint import save_model
from myxtts.train import checkpoint as train_checkpoint

from .messy import KEPT, SKIPPED, make_messy_corpus

LJ = Path(__file__).parent.parent / "fixtures" / "ljspeech"


def one_line(e) -> str:
    text = str(e.value if hasattr(e, "value") else e)
    assert "\n" not in text and "Traceback" not in text, text
    return text


# ------------------------------------------------------------------------ corpus lines, clips

@pytest.fixture(scope="module")
def messy(tmp_path_factory):
    root = tmp_path_factory.mktemp("messy")
    make_messy_corpus(root)
    report = prepare(root, root.parent / "messy-cache", load(), progress=False)
    reasons = {}
    for s in report["skipped"]:
        reasons.setdefault(s["id"], []).append(s["reason"])
    return Cache(root.parent / "messy-cache"), reasons


@pytest.mark.parametrize("uid", KEPT)
def test_usable_clip_in_an_awkward_format_is_kept(messy, uid):
    cache, reasons = messy
    assert uid in cache.index.id
    assert uid not in reasons or uid == "plain"  # a second "plain" line is the duplicate skipped
    assert cache.index.n_frames[cache.index.id.index(uid)] > 0


@pytest.mark.parametrize("uid", SKIPPED)
def test_unusable_line_is_skipped_with_its_reason(messy, uid):
    cache, reasons = messy
    assert uid in reasons, f"{uid} not reported"
    assert any(SKIPPED[uid] in r for r in reasons[uid]), reasons[uid]
    assert all("\n" not in r for r in reasons[uid])
    if uid not in KEPT:
        assert uid not in cache.index.id


# ------------------------------------------------------------------------- text encodings

CAFE = "Café au lait, déjà vu."


def _encoded(kind: str) -> tuple[bytes, dict[int, str]]:
    """Metadata bytes for the 8 fixture clips, and {line: text that must be read}."""
    rows = [line.split("|")[:2] for line in (LJ / "metadata.csv").read_text().splitlines()]
    rows[1][1], rows[4][1] = CAFE, "Naïve résumé."
    text = "\n".join(f"{uid}|{t}" for uid, t in rows) + "\n"
    want = {n: t for n, (_, t) in enumerate(rows, 1)}
    if kind == "utf8-with-one-cp1252-line":  # one line pasted from a Windows editor
        lines = [line.encode("utf-8") for line in text.splitlines()]
        lines[4] = text.splitlines()[4].encode("cp1252")
        return b"\n".join(lines) + b"\n", want
    if kind == "utf8-bom-crlf":
        return codecs.BOM_UTF8 + text.replace("\n", "\r\n").encode("utf-8"), want
    if kind == "utf16-bom":
        return text.encode("utf-16"), want
    if kind == "cp1252-file":  # an old corpus: every accented line is read as cp1252
        return text.encode("cp1252"), want
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["utf8-with-one-cp1252-line", "utf8-bom-crlf", "utf16-bom",
                                  "cp1252-file"])
def test_each_metadata_line_is_decoded_on_its_own(tmp_path, kind):
    root = tmp_path / "corpus"
    shutil.copytree(LJ, root)
    data, want = _encoded(kind)
    (root / "metadata.csv").write_bytes(data)
    utts, problems, _ = read_corpus(root)
    assert [u.text for u in utts] == list(want.values())  # no "CafÃ©", no lost line, no BOM
    notes = [p for p in problems if p.kept]
    assert len(notes) == len(problems)  # nothing skipped
    if kind == "utf8-with-one-cp1252-line":
        assert [p.id for p in notes] == ["metadata.csv:5"]
        assert "not valid UTF-8; read as cp1252" in notes[0].reason and "Naïve" in notes[0].reason
    elif kind == "cp1252-file":
        assert [p.id for p in notes] == ["metadata.csv:2", "metadata.csv:5"]
    else:
        assert notes == []


def test_a_non_utf8_line_is_kept_and_noted_in_the_prepare_report(tmp_path):
    root = tmp_path / "corpus"
    shutil.copytree(LJ, root)
    (root / "metadata.csv").write_bytes(_encoded("utf8-with-one-cp1252-line")[0])
    report = prepare(root, tmp_path / "c", load(), progress=False)
    cache = Cache(tmp_path / "c")
    assert report["utterances"] == 8 and report["skipped"] == []
    assert [n["id"] for n in report["notes"]] == ["metadata.csv:5"]
    assert CAFE in cache.index.text and "Naïve résumé." in cache.index.text


# -------------------------------------------------------------------------- damaged cache

@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    out = tmp_path_factory.mktemp("pristine") / "c"
    prepare(LJ, out, load(), chunk_size=3, progress=False)  # 3 shards
    return out


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _edit_json(f: Path, change) -> None:
    obj = json.loads(f.read_text())
    change(obj)
    f.write_text(json.dumps(obj))


DAMAGE = {  # name: (damage(cache), where, what)
    "shard-file-deleted": (lambda c: (c / "shards/00001/mel.npy").unlink(),
                           "shard 00001", "mel.npy missing"),
    "shard-folder-deleted": (lambda c: shutil.rmtree(c / "shards/00002"),
                             "shard 00002", "shard folder missing"),
    "mel-truncated": (lambda c: _truncate(c / "shards/00001/mel.npy"),
                      "shard 00001", "mel.npy truncated"),
    "wav-truncated": (lambda c: _truncate(c / "shards/00000/wav.npy"),
                      "shard 00000", "wav.npy truncated"),
    "tokens-emptied": (lambda c: (c / "shards/00002/tokens.npy").write_bytes(b""),
                       "shard 00002", "tokens.npy unreadable"),
    "meta-not-json": (lambda c: (c / "meta.json").write_text('{"format_version": 1, "sett'),
                      "meta.json", "unreadable (not JSON"),
    "meta-field-missing": (lambda c: _edit_json(c / "meta.json", lambda m: m.pop("shards")),
                           "meta.json", "incomplete"),
    "index-deleted": (lambda c: (c / "index.json").unlink(), "index.json", "missing"),
    "index-not-json": (lambda c: (c / "index.json").write_text("[1, 2"),
                       "index.json", "unreadable (not JSON"),
    "index-column-cut": (lambda c: _edit_json(c / "index.json", lambda i: i["n_frames"].pop()),
                         "index.json", "columns of different lengths"),
}


@pytest.mark.parametrize("name", DAMAGE)
def test_damaged_cache_is_one_line_naming_the_part_and_fix_repairs_it(pristine, tmp_path, name):
    damage, where, what = DAMAGE[name]
    cache = tmp_path / "c"
    shutil.copytree(pristine, cache)
    damage(cache)
    with pytest.raises(UserError) as e:
        Cache(cache)
    assert one_line(e).startswith(f"{cache}: {where}: {what}")
    assert one_line(e).endswith(f"; run `myxtts cache verify {cache} --fix`")
    found = verify(cache)
    assert check_structure(cache) == found[:1] and what in found[0][1]
    repair(cache, {part for part, _ in found}, workers=1)  # what `cache verify --fix` does
    assert verify(cache) == [] and len(Cache(cache)) == 8


def test_unfinished_cache_says_to_rerun_prepare(pristine, tmp_path):
    cache = tmp_path / "c"
    shutil.copytree(pristine, cache)
    (cache / "meta.json").unlink()
    with pytest.raises(UserError) as e:
        Cache(cache)
    assert "prepare did not finish (no meta.json); run the same `myxtts prepare`" in one_line(e)
    assert verify(cache) == [("meta.json", "missing: the cache is incomplete (prepare did not finish)")]


@pytest.mark.parametrize("name, message", [("nosuch", "no such folder"),
                                           ("empty", "not a prepared cache (no meta.json)")])
def test_a_folder_without_a_cache_is_named_as_such(tmp_path, name, message):
    (tmp_path / "empty").mkdir()
    for call in (Cache, verify):  # not "incomplete, use --fix": there is nothing to fix
        with pytest.raises(UserError) as e:
            call(tmp_path / name)
        assert one_line(e) == f"{tmp_path / name}: {message}" + \
            ("; run `myxtts prepare`" if name == "empty" else "")


def test_a_corpus_with_nothing_usable_leaves_no_cache_and_says_why(tmp_path):
    root = tmp_path / "corpus"
    (root / "wavs").mkdir(parents=True)
    shutil.copy(LJ / "wavs" / "LJ001-0001.wav", root / "wavs" / "a.wav")
    (root / "metadata.csv").write_text("a||\nb|No audio.\nc|No audio either.\n")
    with pytest.raises(UserError) as e:
        prepare(root, tmp_path / "c", load(), progress=False)
    assert one_line(e) == (f"no usable utterances in {root}: all 3 skipped (2 audio not found, "
                           f"1 empty text); details in {tmp_path / 'c' / 'report.json'}")
    assert not (tmp_path / "c" / "meta.json").exists()
    for call in (Cache, verify):  # never "OK", never "use --fix"
        with pytest.raises(UserError, match="holds 0 utterances: prepare found nothing usable"):
            call(tmp_path / "c")


@pytest.mark.parametrize("workers", [0, 1])
def test_non_finite_mel_stops_the_loader_naming_the_shard(pristine, tmp_path, workers):
    cache = tmp_path / "c"
    shutil.copytree(pristine, cache)
    mel = np.load(cache / "shards/00001/mel.npy", mmap_mode="r+")
    mel[mel.shape[0] // 2, 7] = np.inf  # what a flipped exponent bit turns a value into
    mel.flush()
    del mel
    assert check_structure(cache) == []  # the file's structure is intact: caught where used
    assert verify(cache) == [("00001", "mel.npy checksum mismatch (corrupted)")]
    c = Cache(cache)
    cfg = load(None, ["data.pad_multiple=16", "data.frame_budget=1800"])
    with pytest.raises(UserError) as e:
        for _ in zip(range(100), BatchStream(make_loader(c, cfg, num_workers=workers))):
            pass
    bad = next(i for i in range(len(c)) if not np.isfinite(c.mel(i)).all())
    assert one_line(e) == (f"{cache / 'shards/00001/mel.npy'}: utterance {c.index.id[bad]} has "
                           "non-finite mel values (the shard is corrupted); "
                           f"run `myxtts cache verify {cache} --fix`")


# ------------------------------------------------------------------------- file permissions

@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)],
                         ids=["umask-022", "umask-027"])
def test_written_files_follow_the_umask(tmp_path, umask, file_mode, dir_mode):
    old = os.umask(umask)
    try:
        prepare(LJ, tmp_path / "cache", load(), chunk_size=4, progress=False)
        cfg = load("tiny")
        model = torch.nn.Linear(2, 2)
        save_model(tmp_path / "export" / "model.safetensors", model, cfg, ["a", "b"])
        ckpt = train_checkpoint.save(tmp_path / "run", 10, model, cfg, ["a", "b"], {"step": 10},
                                     keep_last=2)
        train_checkpoint.save_best(tmp_path / "run", ckpt)
    finally:
        os.umask(old)
    written = sorted(tmp_path.rglob("*"))
    assert {p.name for p in written} >= {"model.safetensors", "state.pt", "meta.json", "index.json",
                                         "report.json", "recipe.json", "mel.npy", "shard.json"}
    for p in written:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (dir_mode if p.is_dir() else file_mode), f"{p}: {oct(mode)}"


def test_on_the_fly_source_audio_gone_since_prepare_names_the_file(tmp_path):
    root = tmp_path / "corpus"
    shutil.copytree(LJ, root)
    prepare(root, tmp_path / "c", load(), progress=False)
    (root / "wavs" / "LJ001-0003.wav").unlink()
    cfg = load(None, ["data.pad_multiple=16", "data.frame_budget=1800", "data.on_the_fly=true"])
    with pytest.raises(UserError) as e:
        for _ in zip(range(100), make_loader(Cache(tmp_path / "c"), cfg, num_workers=1)):
            pass
    assert one_line(e) == (f"{root / 'wavs' / 'LJ001-0003.wav'}: audio file not found (on-the-fly "
                           f"mode decodes the source audio of {tmp_path / 'c'} every epoch)")
