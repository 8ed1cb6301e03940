"""`myxtts demo`: the whole job on the bundled demo corpus, end to end, on any machine.

prepare → train briefly → with ``--vocoder-minutes``, train the run's vocoder too → synthesize in
a voice cloned from a held-out clip → print where the time went (``myxtts.demo`` runs the stages).
Everything lands in one output folder.
"""
from __future__ import annotations

from pathlib import Path

from myxtts.commands.common import add_command, check_output
from myxtts.commands.prepare import print_report
from myxtts.demo import DEFAULT_MINUTES, DEMOS, demo_corpus, run_demo
from myxtts.errors import UserError


def demo(out: Path, minutes: float, steps: int | None, vocoder_minutes: float = 0.0,
         language: str = "en") -> int:
    # Both checked before preparing: --steps 0 would otherwise mean "no cap" (the preset's
    # thousands of steps, with no time budget either), and --minutes 0 no time budget.
    if steps is not None and steps < 1:
        raise UserError(f"--steps must be at least 1, got {steps}")
    if not minutes > 0:
        raise UserError(f"--minutes must be positive, got {minutes:g}")
    if not vocoder_minutes >= 0:
        raise UserError(f"--vocoder-minutes must be 0 or more, got {vocoder_minutes:g}")
    demo_corpus(language)  # an unknown language is one line before the output folder is made
    check_output(out, "--out", folder=True)
    d = run_demo(out, minutes, steps, vocoder_minutes, prepared=print_report, language=language)

    total = sum(d.timings.values())
    print("\nwhere the time went (whole demo):")
    for stage, sec in d.timings.items():
        print(f"  {stage:<11} {sec:7.1f} s  {100 * sec / total:5.1f}%")
    ib = d.training.get("input_bound_pct")
    print(f"  training loop: input-bound {ib:.1f}% | {d.training.get('steps')} steps"
          if ib is not None else f"  training loop: {d.training.get('steps')} steps")
    print(f"\nwrote {d.wav} (reference voice: {d.reference.name}; audio through {d.vocoder}); "
          f"training run in {d.run}")
    print(describe(d.spoken, d.decoder_cap))
    return 0


def describe(result, cap: int) -> str:
    """What the demo wav holds, in figures, with a warning when it is silent or was cut."""
    from myxtts.infer import dbfs

    line = (f"  {result.seconds:.2f} s, peak {dbfs(result.peak):.1f} dBFS, "
            f"RMS {dbfs(result.rms):.1f} dBFS, "
            + ("stopped on its own" if result.stopped else
               f"cut at model.max_decoder_steps={cap}"))
    if result.silent:
        line += ("\n  WARNING: the wav is silent: the model produced no sound (train longer with "
                 "--minutes, or look at the training log)")
    if not result.stopped:
        line += ("\n  WARNING: the model did not stop on its own, so the wav is cut where the "
                 "decoder cap ends it (train longer with --minutes)")
    return line


def add_parser(sub) -> None:
    p = add_command(sub, "demo", "prepare, train and synthesize on the bundled demo corpus")
    p.add_argument("--out", default="demo_out", help="folder for the cache, run and wav")
    p.add_argument("--minutes", type=float, default=DEFAULT_MINUTES, help="training time budget")
    p.add_argument("--steps", type=int, default=None, help="train exactly this many steps instead")
    p.add_argument("--vocoder-minutes", type=float, default=0.0,
                   help="also train the run's vocoder (RUN/vocoder) for this long; 0: Griffin-Lim")
    p.add_argument("--language", default="en", metavar="CODE",
                   help=f"the demo corpus's language: {', '.join(DEMOS)} (data/demo, data/demo-fa)")
    p.set_defaults(func=lambda a: demo(Path(a.out), a.minutes, a.steps, a.vocoder_minutes,
                                       a.language))
