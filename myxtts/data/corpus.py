"""Listing a corpus: where it is (a folder, or its metadata file given alone), which format it
is in when not told (:func:`detect_format`), and the reader of that format (:mod:`myxtts.data.manifest`).
"""
from __future__ import annotations

from pathlib import Path

from myxtts.data.manifest import (
    Problem,
    Utterance,
    read_csv,
    read_jsonl,
    read_libritts,
    read_lines,
    read_ljspeech,
    read_vctk,
)
from myxtts.errors import UserError

FORMATS = ("auto", "ljspeech", "csv", "vctk", "libritts", "jsonl")


def _looks_like_libritts(root: Path) -> bool:
    """Transcripts two or three folders down: SPEAKER/CHAPTER/ or SUBSET/SPEAKER/CHAPTER/."""
    return any(next(iter(root.glob(depth + name)), None) is not None
               for depth in ("*/*/", "*/*/*/") for name in ("*.normalized.txt", "*.trans.tsv"))


def detect_format(root: Path, metadata: Path | None = None) -> str:
    if metadata is not None and metadata.suffix == ".jsonl":
        return "jsonl"
    if metadata is not None:
        first = read_lines(metadata)[:1]
        return "csv" if first and "audio_file" in first[0].lower() else "ljspeech"
    if (root / "metadata.csv").is_file():
        first = read_lines(root / "metadata.csv")[:1]
        return "csv" if first and "audio_file" in first[0].lower() else "ljspeech"
    if list(root.glob("*.csv")):
        return "csv"
    if list(root.glob("*.jsonl")):
        return "jsonl"
    if _looks_like_libritts(root):
        return "libritts"
    if any(p.is_dir() for p in root.iterdir()):
        return "vctk"
    raise UserError(f"{root}: cannot tell the corpus format (no metadata.csv, .csv or .jsonl file, "
                    "no speaker folders); pass --format")


READERS = {"ljspeech": read_ljspeech, "csv": read_csv, "vctk": read_vctk, "libritts": read_libritts,
           "jsonl": read_jsonl}


def locate(data: str | Path, metadata: str | Path | None = None) -> tuple[Path, Path | None]:
    """(corpus folder, metadata file): the corpus may be given as its metadata file itself (a
    JSON-lines manifest or a metadata .csv, as NeMo and HiFi-TTS users pass it)."""
    data, metadata = Path(data), Path(metadata) if metadata else None
    if data.is_file() and metadata is None:
        return data.parent, data
    return data, metadata


def read_corpus(root: str | Path, fmt: str = "auto", metadata: str | Path | None = None,
                wav_dir: str | Path | None = None) -> tuple[list[Utterance], list[Problem], str]:
    """List a corpus. Returns (utterances in corpus order, problems, the format used)."""
    root, metadata = locate(root, metadata)
    if not root.is_dir():
        raise UserError(f"{root}: dataset folder not found")
    wav_dir = Path(wav_dir) if wav_dir else None
    if fmt == "auto":
        fmt = detect_format(root, metadata)
    if fmt not in READERS:
        raise UserError(f"unknown corpus format {fmt!r}; choose one of {', '.join(FORMATS)}")
    utts, problems = READERS[fmt](root, metadata, wav_dir)
    return utts, problems, fmt
