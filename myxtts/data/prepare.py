"""`myxtts prepare`: compute every feature exactly once into a packed, memory-mapped cache.

Work is split into fixed chunks of the corpus (in metadata order); chunk j becomes shard j.
Each shard is written atomically, so a run killed at any moment leaves only whole shards behind
and a rerun does only the missing ones. ``--shard I/N`` makes this process do the chunks with
j % N == I, so N machines sharing a folder can prepare one corpus; whichever finishes the last
shard (or a plain rerun) merges the shard indices into the cache index. Bad inputs never stop
the run: each is listed in ``report.json`` with its reason; a corpus with nothing usable leaves
no cache (no meta.json) and an error that says why.

Stopping: SIGINT or SIGTERM to the whole process group reaches the main process only (workers
ignore both or are out of the group, see :mod:`myxtts.data.workers`). It ends its workers, keeps every finished shard,
says how many there are, and exits: SIGINT as KeyboardInterrupt (status 130 from the command
line), SIGTERM with status 143 (128 + 15, what a shell shows for a process it killed). A rerun
resumes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

from myxtts import audio
from myxtts.config import Config, from_dict
from myxtts.data.cachedir import CacheDir
from myxtts.data.corpus import locate, read_corpus
from myxtts.data.format import FORMAT_VERSION, Index, settings_diff, settings_of, write_shard
from myxtts.data.manifest import PSEUDO
from myxtts.data.symbols import Match, text_pass
from myxtts.data.workers import hold_stop_signals, ignore_stop_signals
from myxtts.errors import UserError
from myxtts.files import remove_stale_temporaries, user_cache, write_json
from myxtts.text import EOS_ID, TextProcessor

DEFAULT_CHUNK = 256


def _process(job: tuple) -> tuple:
    """One utterance: decode → mono → resample → trim → mel. Runs in a worker process."""
    path, speed, cfg_audio, cfg_data = job
    try:
        wav = audio.load_audio(path, cfg_audio.sample_rate)
    except audio.AudioError as e:
        return ("skip", str(e))
    wav = audio.preprocess(audio.change_speed(wav, speed, cfg_audio.sample_rate), cfg_audio)
    seconds = wav.size / cfg_audio.sample_rate
    if wav.size == 0:
        return ("skip", "silent: nothing above the trim threshold")
    if seconds < cfg_data.min_seconds:
        return ("skip", f"too short: {seconds:.2f} s < data.min_seconds={cfg_data.min_seconds}")
    if seconds > cfg_data.max_seconds:
        return ("skip", f"too long: {seconds:.2f} s > data.max_seconds={cfg_data.max_seconds}")
    mel = audio.mel_spectrogram(wav, cfg_audio).astype(np.float16)  # (T, n_mels)
    pcm = np.clip(np.round(wav * 32767.0), -32768, 32767).astype(np.int16) if cfg_data.store_wav else None
    return ("ok", mel, pcm)


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)  # one process per core is the parallelism; threads would fight
    # The group's signals are the main process's call; it ends the pool.
    ignore_stop_signals(starting_slowly=True, own_group=True)


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the pool is ended and the bar closed."""


@contextlib.contextmanager
def _sigterm_cleans_up():
    """While preparing, SIGTERM raises _Terminated; once the stack has unwound (pool ended,
    finished shards kept), the process exits with status 143 = 128 + SIGTERM, as a process
    killed by it reports, after the usual exit clean-up. Left alone where the process already
    handles SIGTERM itself, or off the main thread (signals cannot be set there)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def terminated(signum, frame):
        raise _Terminated

    signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    except _Terminated:
        raise SystemExit(128 + signal.SIGTERM) from None
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def pseudo_speeds(n: int) -> list[float]:
    """The speeds of ``n`` pseudo-speakers per voice: 0.9, 1.1, 0.8, 1.2, ... (F0 and formants
    move with the speed, so each is heard as another voice; Kaldi's 0.9/1.1 first)."""
    return [round(1 + 0.1 * (k // 2 + 1) * (-1 if k % 2 == 0 else 1), 2) for k in range(n)]


def _pseudo_speakers(kept: list, val: np.ndarray, n: int) -> list:
    """Each training utterance again at each of :func:`pseudo_speeds`, as a voice of its own
    (``spk1~speed0.9``): its references are drawn from that voice, so they are perturbed as the
    target is. Held-out utterances are not copied: validation hears the real voices only."""
    return [(dataclasses.replace(u, id=f"{u.id}{PSEUDO}{s:g}", speaker=f"{u.speaker}{PSEUDO}{s:g}",
                                 speed=s), syms)
            for s in pseudo_speeds(n) for (u, syms), v in zip(kept, val) if not v]


def _split(ids: list[str], root: Path, cfg: Config) -> np.ndarray:
    """1 for held-out utterances: those listed in the corpus's val.txt, else a stable hash pick."""
    listed = root / "val.txt"
    if listed.is_file():
        val_ids = {line.strip() for line in listed.read_text().splitlines() if line.strip()}
    else:
        n_val = min(cfg.data.val_max, int(round(len(ids) * cfg.data.val_fraction)))
        ranked = sorted(ids, key=lambda i: hashlib.sha1(i.encode()).hexdigest())
        val_ids = set(ranked[:n_val]) if len(ids) > 1 else set()
    return np.array([1 if i in val_ids else 0 for i in ids], dtype=np.int64)


def prepare(data: str | Path, out: str | Path, cfg: Config, fmt: str = "auto",
            metadata: str | Path | None = None, wav_dir: str | Path | None = None,
            workers: int = 1, shard: tuple[int, int] = (0, 1), chunk_size: int = DEFAULT_CHUNK,
            progress: bool = True, match: Match | None = None) -> dict | None:
    """Prepare a corpus into ``out``. Returns the report, or None if other shards are pending.
    Raises UserError when no utterance of the corpus is usable. ``match``: a trained model whose
    vocabulary the cache's begins with (:mod:`myxtts.data.symbols`), instead of one built from
    the corpus."""
    with _sigterm_cleans_up():
        return _prepare(data, out, cfg, fmt, metadata=metadata, wav_dir=wav_dir, workers=workers,
                        shard=shard, chunk_size=chunk_size, progress=progress, match=match)


def _prepare(data, out, cfg, fmt, metadata, wav_dir, workers, shard, chunk_size, progress, match):
    t0 = time.perf_counter()
    root, metadata = locate(data, metadata)
    root, out = root.resolve(), Path(out)
    utts, problems, fmt = read_corpus(root, fmt, metadata, wav_dir)
    kept, text_problems, unknown, vocab = text_pass(utts, TextProcessor(cfg.text), match)
    problems += text_problems
    # With pseudo-speakers the held-out pick is made here, over the utterances listed, and their
    # copies follow it: a clip the audio pass skips cannot move a copied clip into the held-out
    # split. Without, it is made over the utterances kept (_merge), as caches always had it.
    val_ids = None
    if cfg.data.pseudo_speakers:
        val = _split([u.id for u, _ in kept], root, cfg)
        val_ids = {u.id for (u, _), v in zip(kept, val) if v}
        kept += _pseudo_speakers(kept, val, cfg.data.pseudo_speakers)
    chunks = [kept[i:i + chunk_size] for i in range(0, len(kept), chunk_size)]
    source = {"root": str(root), "format": fmt,
              "metadata": str(Path(metadata).resolve()) if metadata else None,
              "wav_dir": str(Path(wav_dir).resolve()) if wav_dir else None}
    recipe = {"format_version": FORMAT_VERSION, "settings": settings_of(cfg), "config": cfg.to_dict(),
            "source": source, "chunk_size": chunk_size, "vocab": vocab.symbols,
            "match": match.record() if match is not None else None,
            "corpus": hashlib.sha256("\n".join(f"{u.id}|{u.audio}|{u.speaker}|{''.join(s)}"
                                               # a corpus of one language hashes as before
                                               + (f"|{u.language}" if u.language != cfg.text.language else "")
                                               for u, s in kept).encode()).hexdigest()}
    _check_recipe(out, recipe)
    CacheDir(out).shards.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(CacheDir(out).shards)

    index, n = shard
    todo = [j for j in range(len(chunks)) if j % n == index and not _done(out, j)]
    if todo:  # the cache is incomplete until the merge below writes meta.json again
        CacheDir(out).meta.unlink(missing_ok=True)
        done = sum(_done(out, j) for j in range(len(chunks)))
        if done:
            print(f"resuming: {done} of {len(chunks)} chunks already prepared in {out}",
                  file=sys.stderr)
    try:
        computed = _compute(out, chunks, todo, cfg, vocab, root, workers, progress)
    except (KeyboardInterrupt, _Terminated):
        done = sum(_done(out, j) for j in range(len(chunks)))
        print(f"prepare stopped: {done} of {len(chunks)} chunks are prepared and kept in {out}; "
              "run the same command again to resume", file=sys.stderr)
        raise
    missing = [j for j in range(len(chunks)) if not _done(out, j)]
    if missing:
        print(f"shard {index}/{n} done; {len(missing)} chunk(s) belong to other shards. Run the same "
              "command without --shard once they finish to merge.", file=sys.stderr)
        return None
    elapsed = time.perf_counter() - t0
    return _merge(out, recipe, len(chunks), val_ids, cfg, problems, unknown, computed=computed,
                  elapsed=elapsed, workers=workers)


def _done(out: Path, j: int) -> bool:
    return CacheDir(out).shard_info(CacheDir.shard_name(j)).is_file()


def _check_recipe(out: Path, recipe: dict) -> None:
    path = CacheDir(out).recipe()
    if path is None:
        path = CacheDir(out).new_recipe
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file in the way, no permission
            raise UserError(f"--out {out}: cannot create the cache folder ({e.strerror})") from None
        write_json(path, recipe)
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: unreadable ({e}); delete {out} to start over") from None
    diff = settings_diff(old.get("settings", {}), recipe["settings"])
    if diff:
        raise UserError(f"{out} holds a cache prepared with other settings:\n  " + "\n  ".join(diff)
                        + f"\nuse another --out, or delete {out} to start over")
    for key, what in (("corpus", "the corpus changed"), ("chunk_size", "the chunk size changed"),
                      ("vocab", "the vocabulary changed"), ("source", "the source corpus changed")):
        if old.get(key) != recipe[key]:
            raise UserError(f"{out}: {what} since this cache was started; use another --out, "
                            f"or delete {out} to start over")


def _compute(out, chunks, todo, cfg, vocab, root, workers, progress) -> dict:
    """Decode and featurise the chunks in ``todo``; returns audio seconds done and wall time."""
    from tqdm import tqdm

    total = sum(len(chunks[j]) for j in todo)
    stats = {"utterances": total, "audio_seconds": 0.0, "seconds": 0.0}
    if not todo:
        return stats
    t0 = time.perf_counter()
    pool = None
    if workers > 1:
        ctx = mp.get_context("spawn")
        with hold_stop_signals(spawn=True):  # so workers ignore the group's signals from the start
            pool = ctx.Pool(workers, initializer=_init_worker)
    bar = tqdm(total=total, desc="prepare", unit="utt", disable=not progress, file=sys.stderr)
    try:
        for j in todo:
            jobs = [(str((root / u.audio) if not Path(u.audio).is_absolute() else Path(u.audio)),
                     u.speed, cfg.audio, cfg.data) for u, _ in chunks[j]]
            results = pool.imap(_process, jobs, chunksize=4) if pool else map(_process, jobs)
            entries, mels, toks, wavs, skipped = [], [], [], [] if cfg.data.store_wav else None, []
            offs = [0, 0, 0]
            for (u, syms), res in zip(chunks[j], results):
                bar.update(1)
                if res[0] == "skip":
                    skipped.append({"id": u.id, "reason": res[1]})
                    continue
                mel, pcm = res[1], res[2]
                ids = np.array([vocab.index[s] for s in syms] + [EOS_ID], dtype=np.int16)
                entries.append({"id": u.id, "text": u.text, "speaker": u.speaker, "audio": u.audio,
                                "language": u.language,
                                "mel_offset": offs[0], "n_frames": int(mel.shape[0]),
                                "tok_offset": offs[1], "n_tokens": int(ids.size),
                                "wav_offset": offs[2], "n_samples": int(pcm.size) if pcm is not None else 0})
                offs[0] += mel.shape[0]
                offs[1] += ids.size
                mels.append(mel)
                toks.append(ids)
                if wavs is not None:
                    wavs.append(pcm)
                    offs[2] += pcm.size
                stats["audio_seconds"] += mel.shape[0] * cfg.audio.hop_length / cfg.audio.sample_rate
            # Skips travel inside the shard so a merge on another machine still reports them.
            write_shard(CacheDir(out).shard(CacheDir.shard_name(j)), entries, mels, toks, wavs,
                        extra={"skipped": skipped})
    finally:
        bar.close()
        if pool:
            pool.terminate()
    stats["seconds"] = time.perf_counter() - t0
    return stats


def _merge(out: Path, recipe: dict, n_chunks: int, val_ids: set[str] | None, cfg: Config, problems, unknown,
           computed: dict, elapsed: float, workers: int) -> dict:
    """Join the shard indices into one cache index; write report.json, then meta.json last."""
    per_entry = ("id", "text", "audio", "mel_offset", "n_frames", "tok_offset", "n_tokens", "wav_offset",
                 "n_samples")  # the Index columns a shard's entries hold; the others come here
    cols = {k: [] for k in per_entry + ("speaker_name", "language_name", "shard")}
    skipped = [{"id": p.id, "reason": p.reason} for p in problems if not p.kept]
    notes = [{"id": p.id, "reason": p.reason} for p in problems if p.kept]
    cache = CacheDir(out)
    names = [CacheDir.shard_name(j) for j in range(n_chunks)]
    for j, name in enumerate(names):
        info = json.loads(cache.shard_info(name).read_text())
        skipped += info.get("skipped", [])
        for e in info["entries"]:
            cols["shard"].append(j)
            cols["speaker_name"].append(e["speaker"])
            cols["language_name"].append(e.get("language") or cfg.text.language)  # shards of before
            for k in per_entry:
                cols[k].append(e[k])
    speakers = sorted(set(cols["speaker_name"]))
    spk_index = {s: i for i, s in enumerate(speakers)}
    cols["speaker"] = [spk_index[s] for s in cols.pop("speaker_name")]
    languages = sorted(set(cols["language_name"]))
    cols["language"] = [languages.index(lang) for lang in cols["language_name"]]
    cols["val"] = _split(cols["id"], Path(recipe["source"]["root"]), cfg).tolist() if val_ids is None \
        else [int(i in val_ids) for i in cols["id"]]
    hours = sum(cols["n_frames"]) * cfg.audio.hop_length / cfg.audio.sample_rate / 3600
    report = {"utterances": len(cols["id"]), "audio_hours": round(hours, 6),
              "speakers": len(speakers), "val_utterances": int(sum(cols["val"])),
              "skipped": skipped, "notes": notes, "unknown_characters": dict(sorted(unknown.items())),
              "vocabulary_size": len(recipe["vocab"]), "shards": n_chunks, "format": recipe["source"]["format"],
              "languages": _per_language(cols.pop("language_name"), cols["n_frames"], cfg)}
    if computed["utterances"]:
        per_worker = computed["audio_seconds"] / max(computed["seconds"], 1e-9) / max(workers, 1)
        report["timing"] = {"wall_seconds": round(elapsed, 3), "workers": workers,
                            "utterances_computed": computed["utterances"],
                            "audio_seconds_per_second_per_worker": round(per_worker, 2)}
    write_json(cache.report, report)
    if not cols["id"]:  # no meta file: nothing may take this for a usable cache
        cache.meta.unlink(missing_ok=True)
        raise UserError(f"no usable utterances in {recipe['source']['root']}: {skip_summary(skipped)}; "
                        f"details in {cache.report}")
    write_json(cache.index, Index.from_json(cols).to_json())
    meta = {k: recipe[k] for k in ("format_version", "settings", "config", "source", "vocab")}
    meta.update(speakers=speakers, languages=languages, shards=names, utterances=len(cols["id"]))
    write_json(cache.meta, meta)
    return report


def _per_language(names: list[str], n_frames: list[int], cfg: Config) -> dict:
    """{language: {utterances, audio_seconds}} of the utterances kept."""
    out = {}
    for name, frames in zip(names, n_frames):
        n = out.setdefault(name, {"utterances": 0, "audio_seconds": 0.0})
        n["utterances"] += 1
        n["audio_seconds"] += frames * cfg.audio.hop_length / cfg.audio.sample_rate
    return {k: {**v, "audio_seconds": round(v["audio_seconds"], 3)} for k, v in sorted(out.items())}


def skip_summary(skipped: list[dict], top: int = 3) -> str:
    """'all 5 skipped (3 audio not found, 2 too short)': the commonest reasons first."""
    if not skipped:
        return "the corpus lists no utterances"
    kinds = Counter(_reason_kind(s["reason"]) for s in skipped)
    common = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common(top))
    rest = len(kinds) - top
    return f"all {len(skipped)} skipped ({common}{f', and {rest} other reasons' if rest > 0 else ''})"


def _reason_kind(reason: str) -> str:
    """A skip reason without its place and details: 'metadata.csv:3: audio not found (x.wav)'
    → 'audio not found'."""
    reason = re.sub(r"^\S+:\d+: ", "", reason)
    return re.split(r" \(|: ", reason, maxsplit=1)[0]


def repair(cache: Path, broken: set[str], workers: int = 1) -> dict | None:
    """Delete the broken shards (or all derived files) and prepare again from the source corpus."""
    path = CacheDir(cache).recipe()
    if path is None:
        raise UserError(f"{cache}: no {CacheDir.RECIPE}; cannot tell how this cache was made. Prepare it again")
    recipe = json.loads(path.read_text())
    match = Match.of_recipe(recipe, cache)  # before anything is deleted: it may refuse
    for name in broken:
        if CacheDir(cache).shard(name).is_dir():
            shutil.rmtree(CacheDir(cache).shard(name))
    CacheDir(cache).meta.unlink(missing_ok=True)
    CacheDir(cache).embeddings.unlink(missing_ok=True)  # of the clips as they were: computed again on use
    src = recipe["source"]
    return prepare(src["root"], cache, from_dict(recipe["config"]), src["format"], src["metadata"],
                   src["wav_dir"], workers=workers, chunk_size=recipe["chunk_size"], match=match)


DEMO_CORPUS = Path(__file__).resolve().parents[2] / "data" / "demo"  # the corpus this repository bundles


def demo_cache(cfg: Config) -> Path:
    """The bundled demo corpus, prepared once per audio and text setting under ~/.cache (what
    the bench commands measure when no cache is given)."""
    if not (DEMO_CORPUS / "metadata.csv").is_file():
        raise UserError(f"{DEMO_CORPUS}: demo corpus not found; pass --data CACHE")
    key = hashlib.sha256(json.dumps(settings_of(cfg), sort_keys=True).encode()).hexdigest()[:12]
    out = user_cache("myxtts", "bench", f"demo-{key}")
    if not CacheDir(out).meta.is_file():
        print(f"preparing the demo corpus into {out} (once)")
        prepare(DEMO_CORPUS, out, cfg, workers=os.cpu_count() or 1, progress=False)
    return out

