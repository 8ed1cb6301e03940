"""``myxtts doctor``: check this machine, this configuration and this cache before training."""
from __future__ import annotations

import json

from myxtts.commands.common import EXIT_OK, add_command, add_config, add_data, add_overrides, err, load_config
from myxtts.observe.doctor import SECTIONS, doctor
from myxtts.observe.format import findings_text


def add_parser(sub) -> None:
    p = add_command(sub, "doctor", "check the machine, config and cache; ranked findings with fixes",
                    "Audit the environment (GPU, driver, torch build, bf16/TF32, NVML, CPU cores, "
                    "shared and pinned memory, cache disk speed), the configuration (workers, frame "
                    "budget, compile, precision, buckets and padding), run a short step test and "
                    "loader test, and print findings ranked by expected gain, each with the setting "
                    "or command to change.")
    add_config(p, default="tiny")
    add_data(p, required=False, more=" (enables the step, loader and disk tests)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    add_overrides(p, "data.num_workers=4")
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    cfg = load_config(args.config, args.overrides)
    r = doctor(cfg, args.data, say=err)
    print(json.dumps(r, indent=1, default=str) if args.json else text(r))
    return EXIT_OK


def text(r: dict) -> str:
    lines = [r["cpu_note"]] if r["cpu_note"] else []
    for section in SECTIONS:
        lines.append(section)
        lines += [f"  {c['status']:<5} {c['name']:<16} {c['detail']}" for c in r["checks"] if c["section"] == section]
    lines.append(f"findings, ranked by expected gain ({len(r['findings'])}):" if r["findings"] else
                 "findings: none; nothing measured crossed a threshold")
    if r["findings"]:
        lines.append(findings_text(r["findings"]))
    return "\n".join(lines)
