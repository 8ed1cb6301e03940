"""What ``report.html`` shows of learning, beside the speed: the loss per term over steps (training
and validation), the latest alignment, and the training samples to listen to.

Read from the run's own files (``metrics.jsonl``, ``samples/step-N/``), embedded in the page: the
curves as inline SVG, the alignment image and the audio as data URIs, so the report stays one
file. Audio is re-encoded as FLAC (lossless, about half a WAV) and only the latest
``MAX_SAMPLES`` are kept, so a long run's report stays small.
"""
from __future__ import annotations

import base64
import io
from html import escape
from pathlib import Path

from myxtts.observe import svg
from myxtts.rundir import RunDir

MAX_SAMPLES = 4
# metrics.jsonl keys that are figures of the step, not terms of the loss
NOT_LOSS = {"step", "lr", "grad_norm", "skipped_steps", "skipped_in_a_row", "samples_per_s", "frames_per_s",
            "step_ms", "input_bound_pct", "gpu_util_pct", "recompiles_after_warmup", "time_s"}
TRAIN_COLOR, VAL_COLOR = svg.PALETTE[0], svg.PALETTE[1]


def loss_terms(records: list[dict]) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """metrics.jsonl records → {term: {"train": [(step, value)], "val": [...]}}, ``loss`` (the
    total) first. Training lines carry a ``loss``; validation lines ``val_TERM``."""
    out: dict[str, dict[str, list]] = {}
    for r in records:
        step = r["step"]
        for k, v in r.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if k.startswith("val_"):
                out.setdefault(k[4:], {"train": [], "val": []})["val"].append((step, float(v)))
            elif r.get("loss") is not None and k not in NOT_LOSS and not k.startswith("eval_"):
                out.setdefault(k, {"train": [], "val": []})["train"].append((step, float(v)))
    return dict(sorted(out.items(), key=lambda kv: (kv[0] != "loss", kv[0])))


def curves_html(records: list[dict]) -> str:
    """One chart per loss term: training (solid) and validation (dashed) over steps; "" if none."""
    parts = []
    for term, runs in loss_terms(records).items():
        series = [{"label": f"{name} {term}", "x": [s for s, _ in pts], "y": [v for _, v in pts], "color": color,
                   "dash": name == "validation"}
                  for name, pts, color in (("training", runs["train"], TRAIN_COLOR),
                                           ("validation", runs["val"], VAL_COLOR)) if pts]
        if not series:
            continue
        last = "; ".join(f"{s['label']} {s['y'][-1]:.4g} at step {s['x'][-1]}" for s in series)
        parts.append(f'<h3>{escape(term)}</h3>'
                     + svg.line_chart(series, y_range=None, xlabel="step", ylabel=term, height=180)
                     + f'<p class="small">Latest: {escape(last)}.</p>')
    return "".join(parts)


def sample_dirs(samples: Path | None) -> list[Path]:
    """RUN/samples/step-N folders, oldest first."""
    if samples is None or not Path(samples).is_dir():
        return []
    return sorted((d for d in Path(samples).iterdir() if d.is_dir() and d.name.startswith("step-")),
                  key=lambda d: d.name)


def _step(d: Path) -> str:
    return str(int(d.name[5:])) if d.name[5:].isdigit() else d.name


def alignment_html(samples: Path | None) -> str:
    """The latest sample's alignment image (text position over decoder step); "" if none."""
    with_image = [d for d in sample_dirs(samples) if (d / RunDir.SAMPLE_ATTENTION).is_file()]
    if not with_image:
        return ""
    d = with_image[-1]
    data = base64.b64encode((d / RunDir.SAMPLE_ATTENTION).read_bytes()).decode()
    return (f'<img alt="alignment at step {_step(d)}" src="data:image/png;base64,{data}" style="max-width:100%">'
            f'<p class="small">Step {_step(d)}, the training sample\'s sentence: a clean diagonal is a model '
            'that reads the text in order, one part after another.</p>')


def samples_html(samples: Path | None) -> str:
    """The latest training samples as playable audio; "" if none."""
    import soundfile as sf

    rows = []
    for d in sample_dirs(samples)[-MAX_SAMPLES:]:
        wav = d / RunDir.SAMPLE_WAV
        if not wav.is_file():
            continue
        audio, sr = sf.read(wav, dtype="int16")
        buf = io.BytesIO()
        sf.write(buf, audio, sr, format="FLAC")
        said = d / RunDir.SAMPLE_VOCODER
        vocoder = said.read_text().strip() if said.is_file() else "?"
        rows.append(f"<tr><td>{_step(d)}</td><td><audio controls preload=\"none\" "
                    f'src="data:audio/flac;base64,{base64.b64encode(buf.getvalue()).decode()}"></audio></td>'
                    f"<td>{audio.shape[0] / sr:.2f} s</td><td>{escape(vocoder)}</td></tr>")
    if not rows:
        return ""
    return ("<table><tr><th>step</th><th>sample</th><th>length</th><th>audio through</th></tr>"
            + "".join(rows) + "</table>")
