"""Corpus readers → ``Utterance`` records plus the problems found while reading.

Readers never open audio: they only parse metadata and locate files, so a corpus of any size is
listed in seconds. Every line that cannot become an utterance is returned as a ``Problem`` with
the reason, so `prepare` can report it instead of crashing or silently dropping it.

Text files are decoded line by line: UTF-8 (a byte-order mark is dropped; a UTF-16 mark makes
the file UTF-16), and a line that is not valid UTF-8 is read as cp1252 (Windows' Western
encoding, Latin-1's printable characters and more) and kept, with a ``Problem`` marked ``kept``
naming the file and line so the user can check its accents. One such line never changes how
the other lines read.

Formats:
  ljspeech  ``metadata.csv``: ``id|text[|normalized text[|speaker]]``, audio in ``wavs/ID.<ext>``
  csv       a headed file with columns ``audio_file|text|speaker_name`` (``|`` or ``,`` separated)
  vctk      ``SPEAKER/UTT.<ext>`` folders with transcripts in ``txt/SPEAKER/UTT.txt`` or beside the
            audio as ``UTT.txt``
"""
from __future__ import annotations

import codecs
import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from myxtts.errors import UserError
from myxtts.text import echo

AUDIO_EXTS = (".wav", ".flac", ".ogg", ".WAV", ".FLAC", ".OGG")
FORMATS = ("auto", "ljspeech", "csv", "vctk")
DEFAULT_SPEAKER = "speaker"
FALLBACK_ENCODING = "cp1252"


@dataclass(frozen=True)
class Utterance:
    id: str
    audio: str  # path relative to the corpus root, posix style
    text: str
    speaker: str


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


def _read_lines(path: Path, notes: list[Problem] | None = None) -> list[str]:
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
    for n, line in enumerate(_read_lines(metadata, problems), 1):
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
        utts.append(Utterance(uid, _rel(root, audio), text, speaker))
    return utts, problems


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:  # a custom wav directory outside the root: keep it absolute
        return path.resolve().as_posix()


def read_csv(root: Path, metadata: Path | None = None, wav_dir: Path | None = None):
    metadata = metadata or _single_csv(root)
    notes: list[Problem] = []
    lines = _read_lines(metadata, notes)
    if not lines:
        raise UserError(f"{metadata}: empty file")
    delim = "|" if "|" in lines[0] else ","
    reader = csv.reader(io.StringIO("\n".join(lines)), delimiter=delim)
    header = [h.strip().lower() for h in next(reader)]
    if "audio_file" not in header or "text" not in header:
        raise UserError(f"{metadata}: header must name the columns audio_file{delim}text"
                        f"[{delim}speaker_name]; found {echo(delim.join(header))}")
    ia, it = header.index("audio_file"), header.index("text")
    isp = header.index("speaker_name") if "speaker_name" in header else None
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
        speaker = cols[isp].strip() if isp is not None and isp < len(cols) and cols[isp].strip() else DEFAULT_SPEAKER
        utts.append(Utterance(uid, _rel(root, path), cols[it].strip(), speaker))
    return utts, problems


def _single_csv(root: Path) -> Path:
    found = sorted(p for p in root.glob("*.csv") if p.is_file())
    if len(found) != 1:
        raise UserError(f"{root}: expected exactly one .csv metadata file, found {len(found)}; "
                        "name it with --metadata")
    return found[0]


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
    seen, unique = set(), []
    for u in utts:  # mic1/mic2 pairs share a transcript: keep the first
        if u.id in seen:
            problems.append(Problem(u.id, f"{u.audio}: duplicate utterance id"))
        else:
            seen.add(u.id)
            unique.append(u)
    return unique, problems


def detect_format(root: Path, metadata: Path | None = None) -> str:
    if metadata is not None:
        first = _read_lines(metadata)[:1]
        return "csv" if first and "audio_file" in first[0].lower() else "ljspeech"
    if (root / "metadata.csv").is_file():
        first = _read_lines(root / "metadata.csv")[:1]
        return "csv" if first and "audio_file" in first[0].lower() else "ljspeech"
    if list(root.glob("*.csv")):
        return "csv"
    if any(p.is_dir() for p in root.iterdir()):
        return "vctk"
    raise UserError(f"{root}: cannot tell the corpus format (no metadata.csv, no .csv file, no "
                    "speaker folders); pass --format")


READERS = {"ljspeech": read_ljspeech, "csv": read_csv, "vctk": read_vctk}


def read_corpus(root: str | Path, fmt: str = "auto", metadata: str | Path | None = None,
                wav_dir: str | Path | None = None) -> tuple[list[Utterance], list[Problem], str]:
    """List a corpus. Returns (utterances in corpus order, problems, the format used)."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"{root}: dataset folder not found")
    metadata = Path(metadata) if metadata else None
    wav_dir = Path(wav_dir) if wav_dir else None
    if fmt == "auto":
        fmt = detect_format(root, metadata)
    if fmt not in READERS:
        raise UserError(f"unknown corpus format {fmt!r}; choose one of {', '.join(FORMATS)}")
    utts, problems = READERS[fmt](root, metadata, wav_dir)
    return utts, problems, fmt
