"""``myxtts synthesize --checkpoint RUN --text "..." [--reference WAV]``: text (+ voice) to wav."""
from __future__ import annotations

import time
from pathlib import Path

from myxtts import audio
from myxtts.commands.common import EXIT_OK, add_command, err
from myxtts.errors import UserError
from myxtts.infer import GRIFFIN_LIM_NOTE, Synthesizer


def add_parser(sub) -> None:
    p = add_command(sub, "synthesize", "text (+ reference voice) to speech",
                    "Synthesise speech with a trained checkpoint.")
    p.add_argument("--checkpoint", required=True, metavar="RUN_OR_FILE",
                   help="a run directory (newest checkpoint) or a .safetensors file")
    p.add_argument("--text", help="the sentence to say")
    p.add_argument("--texts", metavar="FILE", help="a text file, one sentence per line")
    p.add_argument("--reference", metavar="WAV",
                   help="voice to clone: 1-10 s of speech, any rate/format "
                        "(default: the neutral voice)")
    p.add_argument("--vocoder", metavar="CKPT",
                   help="HiFi-GAN checkpoint (default: Griffin-Lim, lower quality)")
    p.add_argument("--out", metavar="OUT.wav|DIR",
                   help="output file for one sentence, or directory (default: synthesized.wav "
                        "or synthesized/)")
    p.add_argument("--seed", type=int, default=0, help="seed of the pre-net dropout")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--batch-size", type=int, default=16, help="sentences decoded together")
    p.set_defaults(func=run)


def read_texts(args) -> list[str]:
    texts = [args.text] if args.text else []
    if args.texts:
        p = Path(args.texts)
        if not p.is_file():
            raise UserError(f"--texts: file not found: {p}")
        lines = p.read_text(encoding="utf-8").splitlines()
        texts += [line.strip() for line in lines if line.strip()]
    if not texts:
        raise UserError("nothing to say: give --text \"...\" or --texts FILE (one sentence a line)")
    return texts


def output_paths(out: str | None, n: int) -> list[Path]:
    if out is None:
        return [Path("synthesized.wav")] if n == 1 else [Path("synthesized") / f"{i + 1:03d}.wav"
                                                         for i in range(n)]
    p = Path(out)
    if p.suffix.lower() == ".wav":
        return [p] if n == 1 else [p.with_name(f"{p.stem}_{i + 1:03d}.wav") for i in range(n)]
    return [p / f"{i + 1:03d}.wav" for i in range(n)]


def run(args) -> int:
    texts = read_texts(args)
    if args.batch_size < 1:
        raise UserError("--batch-size must be at least 1")
    t0 = time.perf_counter()
    synth = Synthesizer(args.checkpoint, args.vocoder, args.device, log=err)
    mels = synth.mels(texts, args.reference, args.seed, args.batch_size)
    if synth.vocoder is None:
        err(GRIFFIN_LIM_NOTE)
    wavs = synth.vocode(mels)
    seconds = 0.0
    for path, wav in zip(output_paths(args.out, len(texts)), wavs):
        audio.save_wav(path, wav, synth.sample_rate)
        seconds += wav.size / synth.sample_rate
        print(f"{path}  {wav.size / synth.sample_rate:.2f} s")
    took = time.perf_counter() - t0
    print(f"{len(texts)} sentence(s), {seconds:.1f} s of audio in {took:.1f} s "
          f"(step {synth.meta['step']}, voice: {args.reference or 'neutral'})")
    return EXIT_OK
