"""The aligner's durations against two references it never learned from, on a run's clips
(for the autoregressive decoder, the durations its text attention implies):

    words    where each word starts, by the aligner (the first frame of the word's first
             phoneme) and by Whisper's word timestamps on the same recording (cross-attention
             times, 20 ms steps, tens of milliseconds off at best): the start times, matched in
             order, and how far apart they lie
    pauses   the recording's own silences inside the clip (runs of at least ``PAUSE_FRAMES``
             frames more than 4.6 nats, ~40 dB, below the clip's loudest): which tokens the
             aligner gives those frames (a pause token, a stress mark, or a phone)

A word start that lies tens of milliseconds from Whisper's says the aligner found the words; one
that lies hundreds says it did not. Silence given to phones says the aligner stretches them
over pauses, which the frame decoder then learns to say.

    PYTHONPATH=. python benchmarks/alignment_check.py RUN CACHE [--split train|val] [--limit N]
        [--json FILE]

espeak-ng writes some short words together with their neighbour ("in the" as one group), so
the aligner has fewer word starts than Whisper; the two lists are matched in order by the least
total distance, each start used once, a start left unmatched costing ``SKIP_S``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from teacher_forced_asr import teacher_forced  # noqa: E402

from myxtts.data.cache import Cache  # noqa: E402
from myxtts.evaluate.asr import Recognizer  # noqa: E402
from myxtts.evaluate.evaluation import plan  # noqa: E402
from myxtts.models.checkpoint import load_model  # noqa: E402
from myxtts.rundir import resolve_checkpoint  # noqa: E402
from myxtts.text import ALLOWED_PUNCT, EOS, TextProcessor, Vocabulary  # noqa: E402

STRESS = {"ˈ", "ˌ"}  # espeak-ng's stress marks: symbols with no sound of their own
QUIET_NATS = 4.6  # a frame this far (natural log, ~40 dB) below the clip's loudest is quiet
PAUSE_FRAMES = 8  # ~93 ms at 256 / 22050: a pause, not a stop consonant's closure
SKIP_S = 0.25  # cost of leaving a word start unmatched: about a short word's length


def kind(symbol: str) -> str:
    if symbol in ALLOWED_PUNCT or symbol == EOS:
        return "pause"
    return "stress" if symbol in STRESS else "phone"


def durations(out: dict, r: int, n_tokens: int) -> list[int]:
    """One clip's frames per token from the model's teacher-forced outputs: the duration decoder's
    aligner, or the autoregressive decoder's text attention read as the token it attends most at
    each step, held in order (``r`` frames a step)."""
    if "dur" in out:
        return out["dur"][0].long().tolist()
    step_token = out["attn"][0].argmax(-1).cummax(0).values  # (T/r,)
    return torch.bincount(step_token.repeat_interleave(r), minlength=n_tokens).tolist()


def word_starts(kinds: list[str], dur: list[int], frame_s: float) -> list[float]:
    """Seconds at which each word group's first sounding token begins."""
    starts, frame, after_pause = [], 0, True
    for k, d in zip(kinds, dur):
        if k == "pause":
            after_pause = True
        elif after_pause:
            starts.append(frame * frame_s)
            after_pause = False
        frame += d
    return starts


def match(a: list[float], b: list[float], skip: float = SKIP_S) -> list[tuple[float, float]]:
    """Pairs (a_i, b_j), both in order, each used once, at the least total |a_i - b_j| with
    ``skip`` per start left over (an edit distance over times)."""
    n, m = len(a), len(b)
    cost = np.full((n + 1, m + 1), np.inf)
    cost[0, :] = np.arange(m + 1) * skip
    cost[:, 0] = np.arange(n + 1) * skip
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost[i, j] = min(cost[i - 1, j - 1] + abs(a[i - 1] - b[j - 1]),
                             cost[i - 1, j] + skip, cost[i, j - 1] + skip)
    pairs, i, j = [], n, m
    while i and j:
        if cost[i, j] == cost[i - 1, j - 1] + abs(a[i - 1] - b[j - 1]):
            pairs.append((a[i - 1], b[j - 1]))
            i, j = i - 1, j - 1
        elif cost[i, j] == cost[i - 1, j] + skip:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def quiet_frames(mel: torch.Tensor) -> torch.Tensor:
    """True mel (T, M) → (T,) bool: the frames more than ``QUIET_NATS`` below the loudest."""
    loud = mel.float().mean(dim=1)  # (T,) mean log-mel of each frame
    return loud < loud.max() - QUIET_NATS


def inner_pauses(mel: torch.Tensor) -> list[tuple[int, int]]:
    """True mel (T, M) → [start, end) frames of each quiet run of ``PAUSE_FRAMES`` or more between
    the clip's first and last loud frame (leading and trailing silence are not pauses)."""
    quiet = quiet_frames(mel).tolist()
    loud_idx = [t for t, q in enumerate(quiet) if not q]
    runs, t = [], loud_idx[0] if loud_idx else len(quiet)
    end = loud_idx[-1] if loud_idx else -1
    while t <= end:
        if quiet[t]:
            run = t
            while run <= end and quiet[run]:
                run += 1
            if run - t >= PAUSE_FRAMES:
                runs.append((t, run))
            t = run
        else:
            t += 1
    return runs


def nearest_gap(t: float, starts: list[float]) -> float | None:
    return min((abs(t - x) for x in starts), default=None)


def check(clips, cfg, symbols: list[str], cache: Cache, asr: Recognizer) -> dict:
    """``clips``: (sentence, batch, outputs) of each clip's teacher-forced pass
    (``teacher_forced``), so a caller that already ran it does not run it again."""
    frame_s = cfg.audio.hop_length / cfg.audio.sample_rate
    rows, gaps, onset_gaps, frames = [], [], {"aligner": [], "whisper": []}, Counter()
    for s, batch, out in clips:
        kinds = [kind(symbols[i]) for i in batch["tokens"][0].tolist()]
        dur = durations(out, cfg.model.reduction, len(kinds))
        mine = word_starts(kinds, dur, frame_s)
        heard = [start for _, start, _ in asr.words(cache.wav(s.index) / 32768.0, cfg.audio.sample_rate)]
        pairs = match(mine, heard)
        gaps += [abs(x - y) for x, y in pairs]
        owner = [k for k, d in zip(kinds, dur) for _ in range(d)]  # (T,) the kind of each frame's token
        pauses = inner_pauses(batch["mel"][0, :int(batch["mel_lens"][0])])
        counts = Counter(owner[f] for a, b in pauses for f in range(a, b))
        frames.update(counts)
        for _, b in pauses:  # the speech after a pause starts at its first loud frame
            onset_gaps["aligner"].append(nearest_gap(b * frame_s, mine))
            onset_gaps["whisper"].append(nearest_gap(b * frame_s, heard))
        rows.append({"id": s.id, "aligner_word_starts": len(mine), "whisper_words": len(heard),
                     "matched": len(pairs), "pauses": len(pauses), "pause_frames": dict(counts),
                     "median_start_gap_ms": 1000 * statistics.median([abs(x - y) for x, y in pairs])
                     if pairs else None})
    ms = [1000 * g for g in gaps]
    quiet_total = sum(frames.values())
    return {
        "clips": len(rows), "word_starts_matched": len(ms),
        "word_starts_aligner": sum(r["aligner_word_starts"] for r in rows),
        "words_whisper": sum(r["whisper_words"] for r in rows),
        "start_gap_ms_median": statistics.median(ms) if ms else None,
        "start_gap_ms_mean": statistics.fmean(ms) if ms else None,
        "start_gap_within_ms": {str(t): sum(g <= t for g in ms) / len(ms) if ms else None
                                for t in (20, 50, 100)},
        "onsets_after_pauses": len(onset_gaps["aligner"]),
        "onset_gap_ms_median": {k: 1000 * statistics.median(v) if v and None not in v else None
                                for k, v in onset_gaps.items()},
        "pause_frames": quiet_total,
        "pause_share_by_token": {k: frames[k] / quiet_total if quiet_total else None
                                 for k in ("pause", "stress", "phone")},
        "per_clip": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("cache")
    ap.add_argument("--split", default="train", choices=["train", "val"])
    ap.add_argument("--limit", type=int)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    model, cfg, symbols, meta = load_model(resolve_checkpoint(args.run))
    text, cache = TextProcessor(cfg.text, Vocabulary(symbols)), Cache(args.cache)
    clips = [(s, *teacher_forced(model, cfg, text, cache, s)) for s in plan(cache, args.limit, args.split)]
    result = {"checkpoint": meta["path"], "step": meta["step"],
              **check(clips, cfg, symbols, cache, Recognizer(threads=torch.get_num_threads()))}
    out = json.dumps(result, indent=1)
    print(out)
    if args.json:
        args.json.write_text(out)


if __name__ == "__main__":
    main()
