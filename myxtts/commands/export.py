"""``myxtts export --checkpoint RUN --format piper --out DIR/NAME.onnx``: the voice, anywhere.

Writes ``NAME.onnx`` and ``NAME.onnx.json``, a voice Piper's runtime (``python -m piper``, its
HTTP server, wyoming-piper and so Home Assistant) speaks: see :mod:`myxtts.export.piper`.
"""
from __future__ import annotations

import time

from myxtts.commands.common import EXIT_OK, add_checkpoint, add_command, check_output, err

FORMATS = ("piper",)


def add_parser(sub) -> None:
    p = add_command(sub, "export", "write a run's voice for another runtime (Piper)",
                    "Export a trained run as a Piper voice: NAME.onnx (ids to audio, the run's vocoder "
                    "inside) and NAME.onnx.json.")
    add_checkpoint(p)
    p.add_argument("--format", required=True, choices=FORMATS, help="the voice format")
    p.add_argument("--out", required=True, metavar="DIR/NAME.onnx", help="the voice file; NAME.onnx.json "
                                                                          "is written beside it")
    p.add_argument("--data", metavar="CACHE",
                   help="the cache the run trained on: each of its speakers becomes a voice (sid), and "
                        "the phoneme map's coverage is measured on its held-out sentences")
    p.add_argument("--voice", action="append", default=[], metavar="NAME=FOLDER",
                   help="add a cloned voice from a folder of reference clips (all of them, as "
                        "`serve --voices` and `synthesize --reference FOLDER` use them); repeatable")
    p.add_argument("--vocoder", metavar="RUN_OR_FILE",
                   help="vocoder run or file (default: the run's own RUN/vocoder)")
    p.set_defaults(func=run)


def run(args) -> int:
    from myxtts.export.piper import export

    check_output(args.out, "--out")
    t0 = time.perf_counter()
    done = export(args.checkpoint, args.out, args.data, args.voice, args.vocoder, args.step, say=err)
    print(f"{done.onnx}\n{done.config}")
    print(f"{len(done.voices)} voice(s) in {time.perf_counter() - t0:.1f} s; speak with: "
          f"python -m piper -m {done.onnx} -f out.wav")
    return EXIT_OK
