"""``myxtts prepare DATA --out CACHE``: decode, resample, trim, mel and tokens once."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from myxtts.commands.common import EXIT_OK, add_command, add_config, add_overrides, load_config
from myxtts.data.cachedir import CacheDir
from myxtts.data.corpus import FORMATS
from myxtts.data.prepare import DEFAULT_CHUNK, prepare
from myxtts.data.symbols import Match
from myxtts.errors import UserError
from myxtts.text import Vocabulary
from myxtts.train import finetune


def add_parser(sub) -> None:
    p = add_command(sub, "prepare", "compute features once into a packed cache")
    p.add_argument("data", help="corpus folder (LJSpeech, multi-speaker, VCTK-style, LibriTTS, CSV or "
                                "JSON-lines), or its metadata file or .jsonl manifest itself")
    p.add_argument("--out", required=True, help="cache directory to write (resumable)")
    p.add_argument("--format", default="auto", choices=FORMATS, help="corpus layout")
    p.add_argument("--metadata", help="metadata file, if not DATA/metadata.csv")
    p.add_argument("--wavs", help="audio folder, if not DATA/wavs")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--shard", default="0/1", help="I/N: do this machine's part of N (0-based)")
    p.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK, help="utterances per shard")
    p.add_argument("--match", metavar="RUN_OR_CHECKPOINT",
                   help="prepare a corpus to fine-tune this trained model on (train --init-from): "
                   "with its audio and text settings (those given on the command line win) and "
                   "its vocabulary: in its language a symbol it lacks is read as its nearest "
                   "known one; in another (--language) the symbols it lacks are appended")
    p.add_argument("--language", metavar="CODE",
                   help="language of the utterances whose row names none (an espeak-ng code: "
                   "en-us, fa, de), kept as the cache's text.language; default text.language")
    add_config(p)
    add_overrides(p, "audio.sample_rate=16000")
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    cfg = load_config(args.config, args.overrides)
    if args.workers < 1 or args.chunk_size < 1:
        raise UserError("--workers and --chunk-size must be at least 1")
    match = None
    if args.match is not None:  # what train --init-from checks the cache against
        src = finetune.find(args.match)
        acoustic = src.kind == "acoustic"  # a vocoder reads mels only
        cfg = finetune.with_settings(cfg, src.cfg, ("audio", "text") if acoustic else ("audio",),
                                     args.overrides)
        match = Match(Vocabulary(src.vocab), src.cfg.text.language) if acoustic else None
        print(f"preparing with the {'audio and text settings and the vocabulary' if acoustic else 'audio settings'}"
              f" of {src.path}")
    if args.language is not None:  # after --match: the corpus's language, not the model's
        cfg = dataclasses.replace(cfg, text=dataclasses.replace(cfg.text, language=args.language))
    out = Path(args.out)
    report = prepare(args.data, out, cfg, args.format, args.metadata, args.wavs,
                     workers=args.workers, shard=parse_shard(args.shard), chunk_size=args.chunk_size,
                     match=match)
    if report is not None:
        print_report(report, out)
    return EXIT_OK


def print_report(report: dict, out: Path) -> None:
    print(f"prepared {report['utterances']} utterances ({report['audio_hours'] * 60:.1f} min of audio, "
          f"{report['speakers']} speaker(s), {report['val_utterances']} held out) into {out}")
    if "timing" in report:
        t = report["timing"]
        print(f"  {t['audio_seconds_per_second_per_worker']} audio-seconds/s per worker, "
              f"{t['workers']} worker(s), {t['wall_seconds']} s")
    if len(report["languages"]) > 1:
        print("  " + ", ".join(f"{lang}: {n['utterances']} utterances ({n['audio_seconds'] / 60:.1f} min)"
                               for lang, n in report["languages"].items()))
    if report["unknown_characters"]:
        print("  unknown characters dropped: " + " ".join(
            f"{c!r}x{n}" for c, n in report["unknown_characters"].items()))
    notes = report.get("notes", [])
    for note in notes[:20]:
        print(f"  note: {note['reason']}")
    if len(notes) > 20:
        print(f"  ... and {len(notes) - 20} more notes in {CacheDir(out).report}")
    if report["skipped"]:
        print(f"  skipped {len(report['skipped'])}:")
        for s in report["skipped"][:20]:
            print(f"    {s['id']}: {s['reason']}")
        if len(report["skipped"]) > 20:
            print(f"    ... and {len(report['skipped']) - 20} more in {CacheDir(out).report}")


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard I/N`` → (I, N), checked."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise UserError(f"--shard {text!r}: expected I/N, e.g. 0/4") from None
    if n < 1 or not 0 <= i < n:
        raise UserError(f"--shard {text!r}: need 0 <= I < N (shards are numbered from 0)")
    return i, n
