"""``myxtts tune``: the largest frame budget that fits this GPU, the fewest workers that feed it.

Finds the largest data.frame_budget whose largest batch trains within 85 % of the free GPU memory
(what data.frame_budget=auto chooses when a run starts: doubling, then bisection, recovering from
out-of-memory errors, with the batch cap and learning rate that go with it) and the fewest
data.num_workers that keep input-bound below 1 % of the measured step time; writes them as a
YAML overlay and a merged config.
"""
from __future__ import annotations

from myxtts.commands.common import EXIT_OK, add_overrides, add_run_command, check_output, err, load_config
from myxtts.observe.tune import tune


def add_parser(sub) -> None:
    p = add_run_command(sub, "tune", "largest frame budget that fits the GPU, fewest workers that "
                        "feed it", __doc__.split("\n\n", 1)[1])
    p.add_argument("--out", default="tuned.yaml", help="overlay YAML to write; the merged config "
                                                       "goes next to it as NAME.merged.yaml")
    add_overrides(p, "model.d_model=512")
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    cfg = load_config(args.config, args.overrides)
    check_output(args.out, "--out")  # the merged config goes beside it
    r = tune(cfg, args.data, args.out, say=err)
    print(text(r))
    return EXIT_OK


def text(r: dict) -> str:
    lines = [f"decided: {r['overrides']}  ({r['workers_note']}; {r['budget_note']})",
             f"overlay (only the keys decided): {r['overlay']}",
             f"full config with them merged: {r['merged']}",
             "train with:",
             f"  {r['command']}"]
    return "\n".join(lines)
