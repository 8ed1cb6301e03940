"""Model files: ONE ``.safetensors`` per model, self-describing, loadable without pickle.

The tensors are the module's ``state_dict``; the safetensors header metadata (all strings) holds
everything needed to rebuild the module and use it:

    format          "myxtts"            (what makes a file a MyXTTS checkpoint)
    format_version  "7"                 (bumped when the layout or maths changes incompatibly;
                                         :data:`READABLE` lists the versions still read)
    kind            "acoustic" | "vocoder"
    config          the full Config as YAML (audio, text, model, vocoder, ...)
    vocab           the symbol list as JSON (ids are positions)
    step            training step, or ""
    myxtts_version  the package version that wrote it
    speakers        the voices an acoustic model trained on, as JSON (absent in older files)
    languages       the languages an acoustic model speaks, as JSON: its language table's rows
                    in order where it has one (absent in older files: one, ``text.language``)

Writes are atomic (:func:`myxtts.files.atomic_write`), so a crash mid-save never leaves a
truncated checkpoint where a good one was.
Reading uses safetensors alone (no torch.load, no pickle), so a checkpoint from an untrusted source cannot run code.

These are model exports, one file each: the trainer writes one per checkpoint, and where they
live in a run, and which of them speaks for it, is :mod:`myxtts.rundir`'s (a caller given a run
folder finds its file there, :func:`myxtts.rundir.resolve_checkpoint`); optimizer and sampler
state for resuming are the trainer's business.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from myxtts import __version__
from myxtts.config import Config, ConfigError, from_dict, settings_before, upgrade
from myxtts.errors import UserError
from myxtts.files import atomic_write

FORMAT = "myxtts"
FORMAT_VERSION = 7
# Versions each kind can still be read at. Version 2 changed the acoustic model's norms from
# RMSNorm to LayerNorm: same tensor names and shapes, other maths, so version-1 acoustic
# weights would load without an error and compute something else. Version 3 replaced the
# HiFi-GAN vocoder with the Fourier-head one: vocoder files before it hold another network.
# Version 4 added ``model.frame_position`` ("local", then "token"): acoustic files before it have no
# such setting and were all "absolute" (:func:`_settings_before`). Version 5 added
# ``model.ref_self_keys`` (default off): acoustic files before it have no such setting and
# their resamplers' latents all attended to themselves. Version 6 added ``vocoder.magnitude_prior``
# (default on): vocoder files before it predicted the whole log-magnitude. ``model.frame_kernel``
# came without a version: acoustic files that do not name it convolved over 3 frames. Version 7
# added ``languages`` (and, for several, the text encoder's language table): acoustic files before
# it speak one language, their ``text.language`` (:func:`spoken_languages`), and compute as they did.
READABLE = {"acoustic": {"2", "3", "4", "5", "6", "7"}, "vocoder": {"3", "4", "5", "6", "7"}}
KINDS = ("acoustic", "vocoder")


def _unwrap(model: nn.Module) -> nn.Module:
    """The plain module under torch.compile (``_orig_mod``) and DDP (``module``) wrappers, so
    keys never carry wrapper prefixes."""
    while True:
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if not isinstance(inner, nn.Module):
            return model
        model = inner


def save_model(path, model: nn.Module, cfg: Config, vocab_symbols: list[str],
               kind: str = "acoustic", step: int | None = None,
               speakers: list[str] | None = None) -> Path:
    """``speakers``: the voices an acoustic model trained on (its cache's), so that ``eval``
    can tell a voice it never heard (:func:`trained_voices`)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in _unwrap(model).state_dict().items()}
    meta = {
        "format": FORMAT,
        "format_version": str(FORMAT_VERSION),
        "kind": kind,
        "config": yaml.safe_dump(cfg.to_dict(), sort_keys=False),
        "vocab": json.dumps(list(vocab_symbols), ensure_ascii=False),
        "step": "" if step is None else str(int(step)),
        "myxtts_version": __version__,
    }
    if speakers is not None:
        meta["speakers"] = json.dumps(list(speakers), ensure_ascii=False)
    if kind == "acoustic":  # the model's table, or the one language its text front end reads
        spoken = list(getattr(_unwrap(model), "languages", ())) or [cfg.text.language]
        meta["languages"] = json.dumps(spoken, ensure_ascii=False)
    with atomic_write(path) as tmp:
        save_file(state, str(tmp), metadata=meta)
    return path


def read_metadata(path) -> dict:
    """Validated header metadata of a checkpoint file (reads the header only)."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a folder, not a model file (a .safetensors file)")
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise UserError(f"{path} is not a MyXTTS checkpoint (not a safetensors file: {e})") \
            from None
    if meta.get("format") != FORMAT:
        raise UserError(f"{path} is not a MyXTTS checkpoint (no MyXTTS metadata)")
    if meta.get("kind") not in KINDS:
        raise UserError(f"{path}: unknown checkpoint kind {meta.get('kind')!r}")
    version, kind = meta.get("format_version", "?"), meta["kind"]
    if version not in READABLE[kind]:
        raise UserError(f"{path} is a MyXTTS {kind} checkpoint of format version {version} "
                        f"(written by myxtts {meta.get('myxtts_version', '?')}); this myxtts "
                        f"{__version__} reads {kind} checkpoints of format version "
                        f"{', '.join(sorted(READABLE[kind]))}")
    return meta


def trained_voices(meta: dict) -> list[str] | None:
    """The voices a model file says it trained on; None where it does not say (written before
    model files listed them)."""
    return json.loads(meta["speakers"]) if meta.get("speakers") else None


def spoken_languages(meta: dict, cfg: Config) -> list[str]:
    """The languages an acoustic model file speaks, in its table's order; a file written before
    files listed them speaks one, the ``text.language`` its text front end reads."""
    return json.loads(meta["languages"]) if meta.get("languages") else [cfg.text.language]


def build_model(kind: str, cfg: Config, n_vocab: int, languages: list[str] | tuple = ()) -> nn.Module:
    """An untrained module of the given kind, shaped by ``cfg`` (and, for an acoustic model,
    the ``languages`` of its table)."""
    if kind == "acoustic":
        from myxtts.models.xtts import XTTS
        return XTTS(cfg.model, n_vocab, cfg.audio.n_mels, languages)
    from myxtts.models.vocoder import build_generator
    return build_generator(cfg)


def _load_state(model: nn.Module, path: Path, device) -> None:
    state = load_file(str(path), device=str(device))
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # a tensor of the wrong shape
        raise UserError(f"{path}: weights do not fit the model its config describes "
                        f"({e})") from None
    if missing or unexpected:
        raise UserError(f"{path}: weights do not fit the model its config describes "
                        f"(missing {missing[:3]}, unexpected {unexpected[:3]})")


def load_weights(model: nn.Module, path) -> dict:
    """Load a model file's weights into an existing module (e.g. to resume training);
    returns the validated header metadata."""
    path = Path(path)
    meta = read_metadata(path)
    target = _unwrap(model)
    _load_state(target, path, next(target.parameters()).device)
    return meta


def _settings_before(kind: str, data: dict) -> dict:
    """A saved config with the values an older format version meant where it has no setting
    (``config.BEFORE``): a default that changed would otherwise rebuild another network around
    old weights. Every version lists all the settings it had, so a missing one is older than it.
    Only the section that shaped the file's own weights (``model`` or ``vocoder``) is filled in."""
    return settings_before(data, "vocoder" if kind == "vocoder" else "model")


def describe(path) -> tuple[Config, list[str], dict]:
    """A checkpoint file's (cfg, vocab_symbols, meta), read from its header alone; meta: the
    header strings, with ``step`` as int or None and ``path`` added."""
    path = Path(path)
    meta = dict(read_metadata(path))
    try:
        cfg = from_dict(_settings_before(meta["kind"], upgrade(yaml.safe_load(meta["config"]))))
        vocab = json.loads(meta["vocab"])
    except (ConfigError, yaml.YAMLError, json.JSONDecodeError, KeyError) as e:
        raise UserError(f"{path}: checkpoint metadata is unusable ({e})") from None
    meta["step"] = int(meta["step"]) if meta.get("step") else None
    meta["path"] = str(path)
    return cfg, vocab, meta


def load_model(path, device="cpu"):
    """→ (model in eval mode, cfg, vocab_symbols, meta). ``path``: a model file.
    meta: as :func:`describe` gives it."""
    path = Path(path)
    cfg, vocab, meta = describe(path)
    model = build_model(meta["kind"], cfg, len(vocab), spoken_languages(meta, cfg))
    _load_state(model, path, device)
    return model.to(device).eval(), cfg, vocab, meta
