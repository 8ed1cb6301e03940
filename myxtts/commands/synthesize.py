"""``myxtts synthesize --checkpoint RUN --text "..." [--voice NAME | --reference WAV] [--language
CODE]``: text (+ voice) to wav, in a language the model speaks
(:attr:`myxtts.infer.Synthesizer.languages`). ``--list-voices`` prints the run's voices by name,
as ``serve`` and ``export`` list them (:meth:`myxtts.infer.Synthesizer.voices`)."""
from __future__ import annotations

import time
from pathlib import Path

from myxtts.commands.common import EXIT_OK, add_checkpoint, add_command, add_seed_device, err
from myxtts.errors import UserError
from myxtts.infer import Synthesizer
from myxtts.voice import default_language


def add_parser(sub) -> None:
    p = add_command(sub, "synthesize", "text (+ reference voice) to speech",
                    "Synthesise speech with a trained checkpoint.")
    add_checkpoint(p)
    p.add_argument("--text", help="the sentence to say")
    p.add_argument("--texts", metavar="FILE", help="a text file, one sentence per line")
    p.add_argument("--reference", metavar="WAV|FOLDER",
                   help="voice to clone: a few seconds of speech, any rate/format; the first "
                        "data.ref_seconds (3 s by default) are used, as in training; a folder of "
                        "clips is one voice, as `serve --voices` and `export --voice` make it "
                        "(default: the neutral voice)")
    p.add_argument("--voice", metavar="NAME",
                   help="a voice of the run by name, as `serve` and `export` name it: a speaker of the "
                        "cache it trained on, or neutral (see --list-voices)")
    p.add_argument("--list-voices", action="store_true",
                   help="print the names of the run's voices, one a line, in the order `serve` lists them, and stop")
    p.add_argument("--language", metavar="CODE",
                   help="the language of the text, an espeak-ng code the model speaks "
                        "(default: the one --voice's clips were read in, where the model speaks it, "
                        "else the model's own)")
    p.add_argument("--out", metavar="OUT.wav|DIR",
                   help="output file for one sentence, or directory (default: synthesized.wav "
                        "or synthesized/)")
    add_seed_device(p)
    p.add_argument("--batch-size", type=int, default=16, help="sentences decoded together")
    p.set_defaults(func=run)


def read_texts(args) -> list[str]:
    texts = [args.text] if args.text else []
    if args.texts:
        p = Path(args.texts)
        if not p.is_file():
            raise UserError(f"--texts: file not found: {p}")
        try:
            lines = p.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as e:
            line = p.read_bytes()[: e.start].count(b"\n") + 1
            raise UserError(f"--texts {p}: line {line} is not UTF-8 text; save the file as UTF-8") from None
        texts += [line.strip() for line in lines if line.strip()]
    if not texts:
        raise UserError("nothing to say: give --text \"...\" or --texts FILE (one sentence a line)")
    return texts


def run(args) -> int:
    if args.list_voices:
        synth = Synthesizer(args.checkpoint, args.vocoder, args.device, log=err, step=args.step)
        print("\n".join(v.name for v in synth.voices()))
        return EXIT_OK
    if args.voice is not None and args.reference is not None:
        raise UserError("--voice names a voice of the run and --reference gives one: give one of them")
    texts = read_texts(args)
    if args.batch_size < 1:
        raise UserError("--batch-size must be at least 1")
    t0 = time.perf_counter()
    synth = Synthesizer(args.checkpoint, args.vocoder, args.device, log=err, step=args.step)
    voice = synth.voice(args.voice) if args.voice is not None else args.reference
    language = synth.language(args.language) if args.language else default_language(voice, synth.languages)
    results = synth.synthesize_to_file(texts, args.out, voice, args.seed, args.batch_size, language)
    for res in results:
        print(f"{res.path}  {res.seconds:.2f} s")
    took = time.perf_counter() - t0
    print(f"{len(texts)} text(s), {sum(r.seconds for r in results):.1f} s of audio in {took:.1f} s "
          f"(step {synth.meta['step']}, voice: {args.voice or args.reference or 'neutral'}, "
          f"language: {language})")
    return EXIT_OK
