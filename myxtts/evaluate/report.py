"""``eval.json`` and ``eval.html``: what an evaluation found, with the audio to check it by ear.

The page has no external assets: plots are inline PNG images, and the audio players link to the
wavs written beside it (``audio/``), so the folder can be copied or served as it is. Figures
that were not measured say so, with the reason, instead of showing a number.
"""
from __future__ import annotations

import base64
import io
from html import escape
from pathlib import Path

import numpy as np

from myxtts import audio, files
from myxtts.evaluate.evaluation import FIGURES, OF, Result
from myxtts.observe.format import MISSING
from myxtts.observe.report import CSS

LABELS = {
    "wer": ("WER, synthesized", "pct"), "cer": ("CER, synthesized", "pct"),
    "wer_ground_truth": ("WER, ground-truth recordings", "pct"),
    "cer_ground_truth": ("CER, ground-truth recordings", "pct"),
    "wer_copy_synthesis": ("WER, copy synthesis (true mel → same inversion)", "pct"),
    "cer_copy_synthesis": ("CER, copy synthesis", "pct"),
    **{f"dnsmos_{k}{of}": (f"{name}, {heard}", "f2")
       for of, heard in zip(OF, ("synthesized", "ground-truth recordings", "copy synthesis"))
       for k, name in (("ovrl", "DNSMOS overall"), ("sig", "DNSMOS speech signal"),
                       ("bak", "DNSMOS background"), ("p808", "DNSMOS P.808"))},
    "speaker_cosine": ("speaker cosine, output vs its reference", "f3"),
    "speaker_cosine_mismatched": ("speaker cosine, output vs another speaker's reference", "f3"),
    "zero_shot_speaker_cosine": ("voices never heard: speaker cosine, output vs its reference", "f3"),
    "zero_shot_nearest_trained_cosine": ("voices never heard: speaker cosine, output vs the nearest "
                                         "training voice", "f3"),
    "zero_shot_identified": ("voices never heard: outputs nearer their own voice than any training voice", "pct"),
    "stopped_share": ("stopped before max_decoder_steps", "pct"),
    "duration_ratio": ("duration, output / ground truth", "f2"),
    "rtf": ("real-time factor (synthesis time / audio time)", "f3"),
}


def figure_text(value, kind: str) -> str:
    """A figure as a report shows it: a percentage or a fixed number of decimals."""
    if value is None:
        return MISSING
    return f"{100 * value:.1f} %" if kind == "pct" else f"{value:.{kind[1]}f}"


def language_lines(summary: dict) -> list[tuple[str, str]]:
    """(label, text) lines saying which language the figures are in and which recogniser heard
    each; with several, each language's WER and CER over its own sentences."""
    langs = summary.get("languages") or []
    out = [("language" if len(langs) == 1 else "languages", ", ".join(langs))]
    out += [(f"speech recogniser, {lang}", heard) for lang, heard in summary.get("asr", {}).items()]
    for lang, s in summary.get("by_language", {}).items():
        out += [(f"{LABELS[k][0]}, {lang} ({s['sentences']} sentence(s))",
                 figure_text(s[k], "pct") if s[k] is not None else "not measured") for k in ("wer", "cer")]
    return out


def write_audio(out: Path, result: Result, sample_rate: int) -> None:
    """audio/ID.wav (synthesized), ID.ground_truth.wav, ID.copy_synthesis.wav; rows get paths."""
    for row, sp, rec, cp in zip(result.rows, result.spoken, result.recordings, result.copies):
        files = {"wav": sp.wav, "wav_ground_truth": rec, "wav_copy_synthesis": cp}
        for key, wav in files.items():
            if wav is None:
                continue
            suffix = "" if key == "wav" else "." + key[4:]
            rel = f"audio/{row['id']}{suffix}.wav"
            audio.save_wav(out / rel, wav, sample_rate)
            row[key] = rel


def write_json(path: Path, summary: dict, rows: list[dict]) -> None:
    files.write_json(path, {**summary, "per_sentence": rows}, default=str)


def _png(img: np.ndarray, xlabel: str, ylabel: str, title: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(8, 2.4))
    ax.imshow(img, aspect="auto", origin="lower", interpolation="none")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72)
    plt.close(fig)
    return f'<img alt="{escape(title)}" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _player(label: str, rel: str | None) -> str:
    if rel is None:
        return f'<div><span class="small">{label}:</span> <span class="nm">not available</span></div>'
    return (f'<div><span class="small">{label}:</span><br><audio controls preload="none" '
            f'src="{escape(rel)}"></audio></div>')


def _dnsmos_text(row: dict) -> str:
    """A sentence's DNSMOS overall: the output's, then the recording's and copy synthesis' where scored."""
    return "; ".join(f"{figure_text(row[f'dnsmos_ovrl{of}'], 'f2')} {heard}"
                     for of, heard in zip(OF, ("synthesized", "recording", "copy synthesis"))
                     if f"dnsmos_ovrl{of}" in row)


def render(result: Result, meta: dict) -> str:
    s = result.summary
    nm = s.get("not_measured", {})
    head = "".join(f"<tr><td>{escape(k)}</td><td>{escape(str(v))}</td></tr>" for k, v in meta.items())
    figs = []
    for key in FIGURES:
        label, kind = LABELS[key]
        cell = figure_text(s.get(key), kind) if s.get(key) is not None else \
            f'<span class="nm">not measured ({escape(nm.get(key, "no data"))})</span>'
        figs.append(f"<tr><td>{escape(label)}</td><td>{cell}</td></tr>")
    figs += [f"<tr><td>{escape(label)}</td><td>{escape(text)}</td></tr>" for label, text in language_lines(s)]
    plots_missing = False
    blocks = []
    for row, sp in zip(result.rows, result.spoken):
        mel = _png(sp.mel.numpy().T, "frame", "mel bin", f"mel: {row['id']}")
        att = _png(sp.attn.T, "decoder step", "text position", f"attention: {row['id']}")
        plots_missing |= mel is None
        status = "stopped on its own" if row["stopped"] else "cut at max_decoder_steps"
        blocks.append(
            f"<h3>{escape(row['id'])} <span class='small'>({escape(row['speaker'])}, reference "
            f"{escape(row['reference'])})</span></h3>"
            f"<table><tr><th>text</th><td>{escape(row['text'])}</td></tr>"
            f"<tr><th>heard</th><td>{escape(row['transcript'])} <span class='small'>(WER "
            f"{figure_text(row['wer'], 'pct')})</span></td></tr>"
            + "".join(f"<tr><th>heard in the {name}</th><td>{escape(row[key] or '')}</td></tr>"
                      for key, name in (("transcript_ground_truth", "recording"),
                                        ("transcript_copy_synthesis", "copy synthesis")) if key in row)
            + f"<tr><th>DNSMOS overall</th><td>{_dnsmos_text(row)}</td></tr>"
            + f"<tr><th>length</th><td>{row['seconds']:.2f} s"
            + ("" if row["seconds_ground_truth"] is None else f" vs {row['seconds_ground_truth']:.2f} s recorded")
            + f"; {status}</td></tr></table>"
            + _player("synthesized", row.get("wav"))
            + _player("ground truth", row.get("wav_ground_truth"))
            + _player("copy synthesis", row.get("wav_copy_synthesis"))
            + (mel or "") + (att or ""))
    note = ("<p class='nm'>plots not drawn (matplotlib is not installed: pip install "
            "'myxtts[report]')</p>" if plots_missing else "")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>MyXTTS evaluation</title>"
            f"<style>{CSS}audio{{width:100%;height:32px}}img{{max-width:100%}}</style></head><body>"
            f"<h1>MyXTTS evaluation</h1><table class='meta'>{head}</table>"
            f"<h2>Figures</h2><table>{''.join(figs)}</table>"
            f"<h2>Sentences</h2>{note}{''.join(blocks)}</body></html>")


def write_report(out: Path, result: Result, meta: dict, sample_rate: int) -> dict:
    """Write audio/, eval.json and eval.html into ``out``; → their paths."""
    out.mkdir(parents=True, exist_ok=True)
    write_audio(out, result, sample_rate)
    paths = {"json": out / "eval.json", "html": out / "eval.html"}
    write_json(paths["json"], {**meta, **result.summary}, result.rows)
    files.write_text(paths["html"], render(result, meta))
    return paths
