"""Fine-tuning: a new run that starts from trained weights (``myxtts train --init-from SRC``).

The common use is adapting a trained multi-speaker model to one new voice from a few minutes of
its speech. SRC is a run folder (its best weights if it has them, else its newest checkpoint), a
checkpoint folder, or a ``model.safetensors`` file. Only the weights are taken: data,
optimizer, schedule (from warm-up), step counter, plan and checkpoints are the new run's own.
It is a run like any other, so once it has a checkpoint it resumes from that, and SRC is not
read again.

Settings. The stage's weight settings (the ``model`` section, or ``vocoder`` for the vocoder
stage) come from SRC, so nobody has to repeat them; the config file's section is not read, and
``model.*`` (``vocoder.*``) settings on the command line apply on top. Those in ``FREE``, which
neither shape a weight nor change what one computes (dropouts, loss weights, inference limits),
may differ from SRC's; any other is an error naming it and both values. The data must be what
the weights learned to read: the cache's mel settings (``audio.*`` except the clip
preprocessing in ``AUDIO_FREE``) and, for the acoustic model, its text mode and vocabulary must
be SRC's (``myxtts prepare --match SRC`` prepares a corpus so). All of this is checked before
any training.

A new language. A cache prepared with ``--match SRC`` from a corpus in another language has
SRC's symbols as its first ids and the ones SRC lacks after them (:mod:`myxtts.data.symbols`).
The run grows every table sized by the vocabulary (the text encoder's embedding): SRC's rows are
copied bit for bit, and each new symbol's row starts as that of its nearest symbol SRC knows
(:func:`myxtts.text.nearest_known`: ``é`` starts as ``e``), else as the mean of SRC's symbol
rows (:func:`grow`). The language table grows the same way (:func:`languages_spoken`,
:func:`grow_languages`): SRC's languages keep their rows, a language it never spoke is appended,
starting as the mean of SRC's rows (zero where SRC spoke one language and had no table, so that
the languages it knew are read exactly as before at the first step).

The run records the origin of its weights, ``{path, step, sha256, voices}`` of SRC's model file,
in its plan (``Plan.init_from``: plan.json, every checkpoint, the run header, summary.json). Its
model files list the voices its weights have heard: SRC's, then the new cache's
(:func:`voices_heard`), so ``eval`` does not call SRC's voices unheard.

``train.freeze`` keeps named parts of the acoustic model as they are (``freeze``); what to
freeze, and the learning rate and length of a fine-tuning run, are the recipe's to measure.
"""
from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch
from safetensors.torch import load_file

from myxtts.config import AudioConfig, Config, apply_overrides, from_dict, parse_override
from myxtts.data.cache import Cache
from myxtts.data.format import sha256
from myxtts.errors import UserError
from myxtts.models.checkpoint import describe, spoken_languages, trained_voices
from myxtts.rundir import RunDir, choose_weights
from myxtts.text import PAD_ID, nearest_known

# Settings that may differ from SRC's: they shape no weight and leave what one computes alone
# (training-only dropouts and loss terms, inference limits, the optimizer's rate).
FREE = {"model": {"dropout", "ref_dropout", "prenet_dropout", "stop_pos_weight",
                  "guided_attn_sigma", "guided_attn_weight", "align_layer", "max_decoder_steps",
                  "stop_threshold", "speaker_loss_weight"},
        "vocoder": {"segment_frames", "lr", "mel_loss_weight", "stft_loss_weight"}}
# Clip preprocessing: which stretch of a recording is kept and how loud, not what a mel frame is.
AUDIO_FREE = {"trim_silence", "trim_db", "normalize_loudness", "target_dbfs"}
SHOWN = 5  # symbols named in a vocabulary mismatch


@dataclass
class Source:
    """The trained weights a fine-tuning run starts from."""
    path: Path               # the model.safetensors file
    kind: str                # acoustic | vocoder
    step: int | None         # the training step it was saved at
    cfg: Config              # the settings it was trained with
    vocab: list[str]         # its symbols (ids are positions)
    voices: list[str] | None = None  # the voices its weights heard, where its file lists them
    languages: list[str] = dataclasses.field(default_factory=list)  # those it speaks, its table's order

    @cached_property
    def sha256(self) -> str:
        return sha256(self.path)

    def record(self) -> dict:
        """What the new run's plan keeps: where its weights came from."""
        out = {"path": str(self.path), "step": self.step, "sha256": self.sha256, "languages": list(self.languages)}
        return out if self.voices is None else {**out, "voices": list(self.voices)}


def voices_heard(init_from: dict | None, cache) -> list[str]:
    """The voices a run's weights have heard: those of the weights it started from (as its plan
    records them), then the cache's training voices it adds."""
    base = list((init_from or {}).get("voices") or [])
    return base + [v for v in cache.voices("train") if v not in base]


def languages_spoken(init_from: dict | None, cache) -> list[str]:
    """The language table of a run's model: the languages of the weights it starts from (as its
    plan records them), in their order, then those of the cache they lack."""
    base = list((init_from or {}).get("languages") or [])
    return base + [lang for lang in cache.languages if lang not in base]


def find(path, stage: str | None = None, flag: str = "--init-from") -> Source:
    """SRC as given to ``--init-from`` (or another ``flag`` naming weights): a model file, a
    folder holding one (a checkpoint, or a run's ``best/``), or a run folder (its best weights
    by ``choose_weights``). With a ``stage``, weights of the other stage are refused."""
    p = Path(path)
    if p.is_dir():
        try:
            file, _ = choose_weights(p)  # a run's best weights, as every command speaks them
        except UserError:
            raise UserError(f"{path}: no weights there (expected a run folder with "
                            f"{RunDir.BEST}/ or {RunDir.CHECKPOINTS}/, a checkpoint folder, or a {RunDir.MODEL} "
                            "file)") from None
    elif p.is_file():
        file = p
    else:
        raise UserError(f"{path}: no such file or folder")
    file = file.resolve()  # what the run records, and every message names
    cfg, vocab, meta = describe(file)
    if stage is not None and meta["kind"] != stage:
        raise UserError(f"{flag} {file}: holds {meta['kind']} weights; {flag} takes {stage} weights")
    return Source(file, meta["kind"], meta["step"], cfg, vocab, trained_voices(meta), spoken_languages(meta, cfg))


def configure(cfg: Config, trained: Config, where, overrides: list[str], section: str) -> tuple[Config, str]:
    """``cfg`` with the settings of ``section`` (the stage's weights': its spec's
    ``weights_section``) that ``trained`` (read from ``where``:
    SRC, or a fine-tuning run's own config.yaml when it resumes) holds in place of the config
    file's, and the command line's settings of that section on top; and a line naming the
    config-file values replaced ("" if none). A command-line setting outside ``FREE`` that
    differs from the trained one is an error naming it."""
    new = with_settings(cfg, trained, (section,), overrides)
    theirs, now, asked = (getattr(c, section) for c in (trained, new, cfg))
    for f in dataclasses.fields(theirs):
        a, b = getattr(now, f.name), getattr(theirs, f.name)
        if f.name not in FREE[section] and a != b:
            raise UserError(f"{section}.{f.name}={a} does not fit the weights of {where}, "
                            f"trained with {section}.{f.name}={b}; a fine-tuned model keeps the "
                            f"architecture of the one it starts from: drop the setting")
    replaced = [f"{section}.{k} {v!r} -> {getattr(now, k)!r}" for k, v in vars(asked).items()
                if v != getattr(now, k)]
    if not replaced:
        return new, ""
    more = f" and {len(replaced) - 3} more" if len(replaced) > 3 else ""
    return new, f"{section} settings of {where}, not of the config: " + ", ".join(replaced[:3]) + more


def with_settings(cfg: Config, trained: Config, sections, overrides: list[str]) -> Config:
    """``cfg`` with the ``sections`` of ``trained`` in place of its own, and the command line's
    settings of those sections (``overrides``) on top."""
    data = cfg.to_dict()
    for section in sections:
        data[section] = trained.to_dict()[section]
    return from_dict(apply_overrides(data, [o for o in overrides
                                            if parse_override(o)[0][0] in sections]))


def check_data(src: Source, data, reads_text: bool, grows: bool = False) -> None:
    """Refuse a cache whose features (and, where the weights ``reads_text``, its spec says, tokens)
    the weights were not trained to read. ``grows``:
    the weights are trained on it (``--init-from``), so its vocabulary may append symbols to
    SRC's; a model that only reads it (a vocoder's teacher) must have them all."""
    cache = Cache(data)
    fix = f"prepare the new voice with `myxtts prepare CORPUS --out CACHE --match {src.path}`"
    for f in dataclasses.fields(AudioConfig):
        have, want = getattr(cache.audio_cfg, f.name), getattr(src.cfg.audio, f.name)
        if f.name not in AUDIO_FREE and have != want:
            raise UserError(f"{data} was prepared with audio.{f.name}={have}, but {src.path} "
                            f"was trained with audio.{f.name}={want}; {fix}")
    if not reads_text:
        return
    have, want = cache.text_cfg.mode, src.cfg.text.mode
    if have != want:
        raise UserError(f"{data} was prepared with text.mode={have}, but {src.path} was trained "
                        f"with text.mode={want}; {fix}")
    have = cache.vocab.symbols
    if have != src.vocab and not (grows and have[:len(src.vocab)] == src.vocab):
        raise UserError(f"{data} has another vocabulary than {src.path}: "
                        f"{vocab_difference(cache.vocab.symbols, src.vocab)}; {fix}")


def vocab_difference(have: list[str], want: list[str]) -> str:
    """How the cache's symbols (``have``) differ from the checkpoint's (``want``), in words."""
    def few(symbols: list[str]) -> str:
        more = f" and {len(symbols) - SHOWN} more" if len(symbols) > SHOWN else ""
        return " ".join(repr(s) for s in symbols[:SHOWN]) + more

    theirs, ours = set(want), set(have)
    extra = [s for s in have if s not in theirs]  # in id order, as each vocabulary lists them
    lacking = [s for s in want if s not in ours]
    parts = ([f"it has {len(extra)} symbol(s) the checkpoint lacks ({few(extra)})"] if extra else []) + \
            ([f"it lacks {len(lacking)} of the checkpoint's ({few(lacking)})"] if lacking else [])
    return ", and ".join(parts) or "the same symbols under other ids"


def load(run, src: Source) -> None:
    """Copy SRC's weights into a freshly built run, before its first step; the tables sized by
    the vocabulary grown to the cache's (:func:`grow`)."""
    own = run.model.state_dict()
    state = grow(load_file(str(src.path), device=str(run.device)), own, src.vocab,
                 run.cache.vocab.symbols)
    state = grow_languages(state, own, len(src.languages))
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise UserError(f"--init-from {src.path}: its weights do not fit this model ("
                        + "; ".join(p for p in (missing and f"missing {', '.join(missing[:3])}",
                                                unexpected and f"unexpected {', '.join(unexpected[:3])}")
                                    if p) + ")")
    for name, t in own.items():  # the first that differs, named, rather than torch's long list
        if state[name].shape != t.shape:
            raise UserError(f"--init-from {src.path}: {name} has shape {tuple(state[name].shape)} "
                            f"there and {tuple(t.shape)} in this model")
    run.model.load_state_dict(state)


def grow(state: dict, own: dict, old: list[str], new: list[str]) -> dict:
    """SRC's ``state`` with a row per symbol of ``new``, a vocabulary that starts with SRC's
    ``old``, in each tensor that ``own`` (the model built for ``new``) has longer by as many
    rows: those sized by the vocabulary, the only ones that differ between two builds of one
    ``model`` section. Old rows are SRC's as they are; a new symbol's row is its nearest known
    symbol's (the mean where that is several), else the mean of SRC's symbol rows."""
    if len(new) == len(old) or new[:len(old)] != old:
        return state  # the same vocabulary, or one load refuses by its shapes
    known = {s: i for i, s in enumerate(old) if i != PAD_ID}
    sources = []  # per new symbol, the old rows it starts from
    for symbol in new[len(old):]:
        near = nearest_known(symbol, known)
        sources.append([known[c] for c in near] if near else list(known.values()))
    grown = dict(state)
    for name, t in state.items():
        mine = own.get(name)
        if mine is not None and t.shape[:1] == (len(old),) and mine.shape == (len(new), *t.shape[1:]):
            extra = torch.stack([t[rows].mean(0) for rows in sources])  # (n_new, *row)
            grown[name] = torch.cat([t, extra.to(t.dtype)])  # (len(new), *row)
    return grown


def grow_languages(state: dict, own: dict, known: int) -> dict:
    """SRC's ``state`` with the language table of ``own`` (the model built for SRC's ``known``
    languages and the cache's new ones after them): SRC's rows as they are, or zeros where SRC
    spoke one language and so had no table (its text was read with nothing added); each new
    language's row the mean of those."""
    name = "text_encoder.language.weight"
    if name not in own or own[name].shape[0] == known:
        return state  # no table, or no new language: load checks the shapes
    table = own[name]
    old = state.get(name, torch.zeros(known, table.shape[1], dtype=table.dtype, device=table.device))  # (known, d)
    extra = old.mean(0, keepdim=True).expand(table.shape[0] - known, -1)  # (new, d)
    return {**state, name: torch.cat([old, extra.to(old.dtype)])}  # (known + new, d)


def describe_origin(init_from: dict) -> str:
    """``Plan.init_from`` in words, for the run header."""
    step = "step ?" if init_from["step"] is None else f"step {init_from['step']}"
    return f"{init_from['path']} ({step}, sha256 {init_from['sha256'][:12]})"


def freeze(model: torch.nn.Module, names: str) -> None:
    """Keep the parts named in ``train.freeze`` (comma-separated, dotted for a part of a part)
    as they are: requires_grad False, so the optimizer, gradient clipping and DDP never see
    them."""
    parts = [n.strip() for n in names.split(",") if n.strip()]
    for name in parts:
        try:
            model.get_submodule(name)
        except AttributeError:
            known = [n for n, _ in model.named_modules() if n]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
            raise UserError(f"train.freeze: the acoustic model has no part {name!r}"
                            + (f" (did you mean '{close[0]}'?)" if close else "")
                            + f"; its parts: {', '.join(n for n, _ in model.named_children())}") \
                from None
    for name in parts:
        model.get_submodule(name).requires_grad_(False)
    if parts and not any(p.requires_grad for p in model.parameters()):
        raise UserError(f"train.freeze={names}: every weight would be frozen, nothing left to train")

