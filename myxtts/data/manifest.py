"""Corpus readers, one per format → ``Utterance`` records plus the problems found while reading
(which reader a corpus takes, and listing it: :mod:`myxtts.data.corpus`).

Readers never open audio: they only parse metadata and locate files, so a corpus of any size is
listed in seconds. Every line that cannot become an utterance is returned as a ``Problem`` with
the reason, so `prepare` can report it instead of crashing or silently dropping it.

Text files are decoded line by line: UTF-8 (a byte-order mark is dropped; a UTF-16 mark makes
the file UTF-16), and a line that is not valid UTF-8 is read as cp1252 (Windows' Western
encoding, Latin-1's printable characters and more) and kept, with a ``Problem`` marked ``kept``
naming the file and line so the user can check its accents. One such line never changes how
the other lines read.

Formats:
  ljspeech  ``metadata.csv``: ``id|text[|normalized text[|speaker[|language]]]``, audio in
            ``wavs/ID.<ext>``; the language is the fifth column only, so a four-column line
            reads as it always did (an empty column is the default)
  csv       a headed file with columns ``audio_file|text[|speaker_name][|language]`` (``|`` or
            ``,`` separated)
  vctk      ``SPEAKER/UTT.<ext>`` folders with transcripts in ``txt/SPEAKER/UTT.txt`` or beside the
            audio as ``UTT.txt``
  libritts  LibriTTS / LibriTTS-R: ``SPEAKER/CHAPTER/ID.wav`` (below the root or one subset folder
            such as ``train-clean-100/``) with ``ID.normalized.txt`` beside it (the text read, by
            default; ``ID.original.txt`` when there is no normalized one), or a chapter's
            ``SPEAKER_CHAPTER.trans.tsv`` (``id<TAB>original<TAB>normalized``)
  jsonl     a JSON-lines manifest (NeMo, HiFi-TTS): one ``{"audio_filepath", "text"[,
            "text_normalized"][, "speaker"][, "language"][, "duration"]}`` per line, audio
            paths relative to the manifest's folder; ``text_normalized`` is read where a line has it

An utterance's ``language`` (an espeak-ng code, ``fa``) is the one its row names; None where it
names none (vctk and libritts name none), which `prepare` reads as the corpus's language
(``prepare --language``, else ``text.language``). The code is checked there, with the text.
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from myxtts.errors import UserError
from myxtts.text import echo

AUDIO_EXTS = (".wav", ".flac", ".ogg", ".WAV", ".FLAC", ".OGG")
DEFAULT_SPEAKER = "speaker"
FALLBACK_ENCODING = "cp1252"


PSEUDO = "~speed"  # marks a pseudo-speaker's id and voice name: "spk1~speed0.9" (prepare)


def real_voice(name: str) -> str:
    """The recorded voice a speaker name stands for: "spk1~speed0.9" → "spk1"."""
    return name.split(PSEUDO)[0]


@dataclass(frozen=True)
class Utterance:
    id: str
    audio: str  # path relative to the corpus root, posix style
    text: str
    speaker: str
    speed: float = 1.0  # a pseudo-speaker's copy of a recording plays at this speed (see prepare)
    language: str | None = None  # as its row names it; None: the corpus's (see the module docstring)


@dataclass(frozen=True)
class Problem:
    id: str
    reason: str
    kept: bool = False  # a note on an utterance that was kept, not a reason it was skipped


def _inside(root: Path, path: Path) -> bool:
    """Lexically inside ``root`` (``..`` resolved, symlinks not followed: a corpus whose wavs/
    links to another disk is fine; an id or path that climbs out of the folder is not)."""
    r, p = os.path.normpath(os.path.abspath(root)), os.path.normpath(os.path.abspath(path))
    return p == r or p.startswith(r + os.sep)


def _find_audio(wav_dir: Path, stem: str) -> Path | None:
    for ext in AUDIO_EXTS:
        p = wav_dir / f"{stem}{ext}"
        if p.is_file():
            return p
    return None


def _safe_id(uid: str) -> str | None:
    """Reason an id is unusable, or None. Ids become file names and keys, so no path tricks."""
    if not uid:
        return "empty id"
    if "/" in uid or "\\" in uid or uid.startswith(".") or "\x00" in uid:
        return f"id {uid!r} contains a path separator or starts with '.'"
    return None


def _decode(raw: bytes) -> tuple[str, bool]:
    """(text, was UTF-8)."""
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode(FALLBACK_ENCODING), False
    except UnicodeDecodeError:  # one of the five bytes cp1252 leaves undefined
        return raw.decode("latin-1"), False


def _fallback_note(where: str, text: str) -> Problem:
    return Problem(where, f"{where}: not valid UTF-8; read as {FALLBACK_ENCODING} "
                          f"({text.strip()[:60]!r}): check its accents, or save the file as UTF-8",
                   kept=True)


def read_lines(path: Path, notes: list[Problem] | None = None) -> list[str]:
    """The file's lines (split at \\n, \\r\\n or \\r), each decoded on its own (see the module
    docstring); a line read as cp1252 is added to ``notes``."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return raw.decode("utf-16").splitlines()
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: starts with a UTF-16 byte-order mark but is not UTF-16 "
                            f"({e.reason} at byte {e.start})") from None
    lines = []
    for n, line in enumerate(raw.removeprefix(codecs.BOM_UTF8).splitlines(), 1):
        text, utf8 = _decode(line)
        if not utf8 and notes is not None:
            notes.append(_fallback_note(f"{path.name}:{n}", text))
        lines.append(text)
    return lines


def read_ljspeech(root: Path, metadata: Path | None = None, wav_dir: Path | None = None):
    metadata = metadata or root / "metadata.csv"
    wav_dir = wav_dir or root / "wavs"
    if not metadata.is_file():
        raise UserError(f"{metadata}: metadata file not found")
    utts, problems, seen = [], [], {}
    for n, line in enumerate(read_lines(metadata, problems), 1):
        if not line.strip():
            continue
        where = f"{metadata.name}:{n}"
        cols = line.split("|")
        uid = cols[0].strip()
        label = uid or where
        if len(cols) < 2:
            problems.append(Problem(label, f"{where}: expected 'id|text', found no '|'"))
            continue
        text = (cols[2] if len(cols) > 2 and cols[2].strip() else cols[1]).strip()
        speaker = cols[3].strip() if len(cols) > 3 and cols[3].strip() else DEFAULT_SPEAKER
        language = cols[4].strip() if len(cols) > 4 and cols[4].strip() else None
        bad = _safe_id(uid)
        if bad:
            problems.append(Problem(label, f"{where}: {bad}"))
            continue
        if uid in seen:
            problems.append(Problem(uid, f"{where}: duplicate id (first seen at line {seen[uid]})"))
            continue
        seen[uid] = n
        audio = _find_audio(wav_dir, uid)
        if audio is None:
            problems.append(Problem(uid, f"{where}: audio not found ({wav_dir.name}/{uid}.wav/.flac/.ogg)"))
            continue
        if not _inside(root, audio):
            problems.append(Problem(uid, f"{where}: audio path escapes the dataset folder"))
            continue
        utts.append(Utterance(uid, _rel(root, audio), text, speaker, language=language))
    return utts, problems


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:  # a custom wav directory outside the root: keep it absolute
        return path.resolve().as_posix()


def read_csv(root: Path, metadata: Path | None = None, wav_dir: Path | None = None):
    metadata = metadata or _single(root, "*.csv", ".csv metadata file")
    notes: list[Problem] = []
    lines = read_lines(metadata, notes)
    if not lines:
        raise UserError(f"{metadata}: empty file")
    delim = "|" if "|" in lines[0] else ","
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delim)
    header = [h.strip().lower() for h in next(reader)]
    if "audio_file" not in header or "text" not in header:
        raise UserError(f"{metadata}: header must name the columns audio_file{delim}text"
                        f"[{delim}speaker_name][{delim}language]; found {echo(delim.join(header))}")
    ia, it = header.index("audio_file"), header.index("text")
    isp, ilang = (header.index(h) if h in header else None for h in ("speaker_name", "language"))
    base = wav_dir or root
    utts, problems, seen = [], notes, {}
    for n, cols in enumerate(reader, 2):
        if not any(c.strip() for c in cols):
            continue
        where = f"{metadata.name}:{n}"
        if len(cols) <= max(ia, it):
            problems.append(Problem(where, f"{where}: expected {len(header)} columns, found {len(cols)}"))
            continue
        rel = cols[ia].strip()
        path = (base / rel) if not Path(rel).is_absolute() else Path(rel)
        uid = Path(rel).with_suffix("").as_posix().replace("/", "_")
        if not rel or not _inside(root if wav_dir is None else base, path):
            problems.append(Problem(uid or where, f"{where}: audio path {rel!r} escapes the dataset folder"))
            continue
        if uid in seen:
            problems.append(Problem(uid, f"{where}: duplicate audio file (first seen at line {seen[uid]})"))
            continue
        seen[uid] = n
        if not path.is_file():
            problems.append(Problem(uid, f"{where}: audio not found ({rel})"))
            continue
        speaker = _column(cols, isp) or DEFAULT_SPEAKER
        utts.append(Utterance(uid, _rel(root, path), cols[it].strip(), speaker,
                              language=_column(cols, ilang)))
    return utts, problems


def _column(cols: list[str], i: int | None) -> str | None:
    """Column ``i`` of a row, stripped; None where the header has no such column, the row is
    short, or the cell is empty."""
    return cols[i].strip() or None if i is not None and i < len(cols) else None


def read_vctk(root: Path, metadata: Path | None = None, wav_dir: Path | None = None):
    audio_root = wav_dir or next((root / d for d in ("wav48_silence_trimmed", "wav48", "wavs", "wav")
                                  if (root / d).is_dir()), root)
    txt_root = metadata or root / "txt"
    utts, problems = [], []
    for spk_dir in sorted(p for p in audio_root.iterdir() if p.is_dir() and p.name != "txt"):
        for audio in sorted(p for p in spk_dir.iterdir() if p.suffix in AUDIO_EXTS):
            stem = audio.stem.removesuffix("_mic1").removesuffix("_mic2")
            uid = stem if stem.startswith(spk_dir.name) else f"{spk_dir.name}_{stem}"
            txt = next((t for t in (txt_root / spk_dir.name / f"{stem}.txt", audio.with_suffix(".txt"))
                        if t.is_file()), None)
            if txt is None:
                problems.append(Problem(uid, f"{_rel(root, audio)}: no transcript found"))
                continue
            text, utf8 = _decode(txt.read_bytes().removeprefix(codecs.BOM_UTF8))
            if not utf8:
                problems.append(_fallback_note(_rel(root, txt), text))
            utts.append(Utterance(uid, _rel(root, audio), text.strip(), spk_dir.name))
    return _unique(utts, problems), problems  # mic1/mic2 pairs share a transcript: the first is kept


def _libritts_texts(chapter: Path, problems: list[Problem]) -> dict[str, str]:
    """{id: normalized text} from a chapter's ``*.trans.tsv`` files (each line ``id, original,
    normalized``; the original where the normalized column is missing)."""
    texts = {}
    for tsv in sorted(chapter.glob("*.trans.tsv")):
        for n, line in enumerate(read_lines(tsv, problems), 1):
            cols = line.split("\t")
            if len(cols) < 2 or not cols[0].strip():
                if line.strip():
                    problems.append(Problem(f"{tsv.name}:{n}", f"{tsv.name}:{n}: expected 'id<TAB>text'"))
                continue
            texts[cols[0].strip()] = (cols[2] if len(cols) > 2 and cols[2].strip() else cols[1]).strip()
    return texts


def _transcripts_without_audio(root: Path, base: Path) -> list[Problem]:
    """A transcript (``ID.normalized.txt``, ``ID.original.txt`` or a ``.trans.tsv`` line) whose
    clip is not there: listed like any other damaged entry, not dropped without a word."""
    audio = {p.with_suffix("").as_posix() for p in base.rglob("*") if p.suffix in AUDIO_EXTS}
    missing = {}
    for txt in base.rglob("*.txt"):
        for kind in (".normalized", ".original"):
            if txt.name.endswith(kind + ".txt"):
                uid = txt.name[:-len(kind + ".txt")]
                missing.setdefault((txt.parent / uid).as_posix(), _rel(root, txt))
    for tsv in base.rglob("*.trans.tsv"):
        for n, line in enumerate(read_lines(tsv), 1):
            uid = line.split("\t", 1)[0].strip()
            if uid:
                missing.setdefault((tsv.parent / uid).as_posix(), f"{_rel(root, tsv)}:{n}")
    return [Problem(Path(stem).name, f"{where}: audio not found ({Path(stem).name}.wav/.flac)")
            for stem, where in sorted(missing.items()) if stem not in audio]


def read_libritts(root: Path, metadata: Path | None = None, wav_dir: Path | None = None):
    base = wav_dir or root
    utts, problems, original = [], [], 0
    for audio in sorted(p for p in base.rglob("*") if p.suffix in AUDIO_EXTS and p.is_file()):
        chapter = audio.parent
        speaker, uid = chapter.parent.name, audio.stem
        txt = next((t for t in (audio.with_name(f"{uid}.normalized.txt"), audio.with_name(f"{uid}.original.txt"))
                    if t.is_file()), None)
        if txt is not None:
            original += txt.name.endswith(".original.txt")
            text, utf8 = _decode(txt.read_bytes().removeprefix(codecs.BOM_UTF8))
            if not utf8:
                problems.append(_fallback_note(_rel(root, txt), text))
        else:
            text = _libritts_texts(chapter, []).get(uid)
            if text is None:
                problems.append(Problem(uid, f"{_rel(root, audio)}: no transcript found "
                                             f"({uid}.normalized.txt, {uid}.original.txt or a .trans.tsv)"))
                continue
        if not text.strip():
            problems.append(Problem(uid, f"{_rel(root, txt or audio)}: empty transcript"))
            continue
        utts.append(Utterance(uid, _rel(root, audio), " ".join(text.split()), speaker))
    problems += _transcripts_without_audio(root, base)
    problems.append(Problem("text", "LibriTTS: read the normalized text (ID.normalized.txt or a "
                                    "chapter's .trans.tsv)" + (f"; {original} clip(s) had only "
                                                               "ID.original.txt, read instead" if original else ""),
                            kept=True))
    return _unique(utts, problems), problems


def read_jsonl(root: Path, metadata: Path | None = None, wav_dir: Path | None = None):
    manifest = metadata or _single(root, "*.jsonl", "JSON-lines manifest (.jsonl)")
    base = wav_dir or manifest.parent
    utts, problems = [], []
    for n, line in enumerate(read_lines(manifest, problems), 1):
        if not line.strip():
            continue
        where = f"{manifest.name}:{n}"
        try:
            row = json.loads(line)
        except ValueError as e:
            problems.append(Problem(where, f"{where}: not JSON ({e.msg} at column {e.colno})"))
            continue
        if not isinstance(row, dict) or not isinstance(row.get("audio_filepath"), str) \
                or not isinstance(row.get("text_normalized") or row.get("text"), str):
            problems.append(Problem(where, f"{where}: expected an object with 'audio_filepath' and 'text'"))
            continue
        rel = row["audio_filepath"]
        path = Path(rel) if Path(rel).is_absolute() else base / rel
        uid = Path(rel).with_suffix("").as_posix().lstrip("/").replace("/", "_")
        if not _inside(root, path):
            problems.append(Problem(uid or where, f"{where}: audio path {rel!r} escapes the dataset folder"))
            continue
        if not path.is_file():
            problems.append(Problem(uid, f"{where}: audio not found ({rel})"))
            continue
        text = (row.get("text_normalized") or row["text"]).strip()
        speaker = str(row.get("speaker") or DEFAULT_SPEAKER).strip() or DEFAULT_SPEAKER
        language = str(row.get("language") or "").strip() or None
        utts.append(Utterance(uid, _rel(root, path), text, speaker, language=language))
    return _unique(utts, problems), problems


def _unique(utts: list[Utterance], problems: list[Problem]) -> list[Utterance]:
    """The first utterance of each id; a repeat is a problem."""
    seen, unique = set(), []
    for u in utts:
        if u.id in seen:
            problems.append(Problem(u.id, f"{u.audio}: duplicate utterance id"))
        else:
            seen.add(u.id)
            unique.append(u)
    return unique


def _single(root: Path, pattern: str, what: str) -> Path:
    found = sorted(p for p in root.glob(pattern) if p.is_file())
    if len(found) != 1:
        raise UserError(f"{root}: expected exactly one {what}, found {len(found)}; name it with --metadata")
    return found[0]
