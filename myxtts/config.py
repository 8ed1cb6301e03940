"""Typed configuration: dataclasses, YAML load/save, dotted ``key=value`` overrides, validation
(each value's type and range: :mod:`myxtts.config_values`).

Every field here is read by some part of the system; a field nobody reads is a defect. Errors
name the offending key, say what was expected, and suggest the closest valid name for typos.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from myxtts.config_values import ConfigError, build, unknown

PRESETS_DIR = Path(__file__).resolve().parent.parent / "configs"
MIN_FRAME_BUDGET = 64  # padded mel frames; frame budgets are searched and rounded in steps of this
MIN_SEGMENT_FRAMES = 8  # mel frames of the shortest vocoder training segment


def _f(default, *, lo=None, hi=None, choices=None, auto=False, help=""):
    """A dataclass field with validation metadata (inclusive range, allowed choices; ``auto``: an
    integer field that also takes the word ``auto``)."""
    meta = {"lo": lo, "hi": hi, "choices": choices, "auto": auto, "help": help}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class AudioConfig:
    sample_rate: int = _f(22050, lo=8000, hi=96000, help="rate every clip is resampled to")
    n_mels: int = _f(80, lo=8, hi=256)
    n_fft: int = _f(1024, lo=64, hi=8192)
    hop_length: int = _f(256, lo=16, hi=4096)
    win_length: int = _f(1024, lo=16, hi=8192)
    fmin: float = _f(0.0, lo=0.0)
    fmax: float = _f(8000.0, lo=0.0, help="upper mel edge in Hz; 0 means sample_rate / 2")
    trim_silence: bool = _f(True, help="cut leading/trailing silence quieter than trim_db")
    trim_db: float = _f(40.0, lo=5.0, hi=120.0, help="dB below the clip's peak counted as silence")
    normalize_loudness: bool = _f(False, help="scale each clip to target_dbfs RMS")
    target_dbfs: float = _f(-24.0, lo=-60.0, hi=0.0)


@dataclass
class TextConfig:
    mode: str = _f("phonemes", choices=["characters", "phonemes"],
                   help="phonemes (espeak-ng, the phonemes extra) is what the duration decoder "
                   "learned to say new sentences from; characters needs nothing installed")
    language: str = _f("en-us", help="language of the text (an espeak-ng code: en-us, fa, de): its "
                       "numbers, dates and punctuation are read in it, and espeak-ng speaks it")
    lowercase: bool = _f(True)
    expand_numbers: bool = _f(True, help="spell out numbers, ordinals, currency, abbreviations")


@dataclass
class DataConfig:
    min_seconds: float = _f(0.3, lo=0.0, help="shorter clips are skipped at prepare time")
    max_seconds: float = _f(20.0, lo=0.1, help="longer clips are skipped at prepare time")
    store_wav: bool = _f(True, help="keep int16 waveforms in the cache (vocoder training)")
    val_fraction: float = _f(0.05, lo=0.0, hi=0.5, help="share held out for validation")
    val_max: int = _f(100, lo=0, help="cap on held-out utterances")
    frame_budget: int | str = _f("auto", lo=MIN_FRAME_BUDGET, auto=True, help="padded mel frames per batch; auto: "
                                 "the largest that fits GPU memory (on a CPU: base_frame_budget)")
    base_frame_budget: int = _f(12000, lo=MIN_FRAME_BUDGET, help="the batch train.lr is set for, and the budget "
                                "of frame_budget=auto where no GPU memory is measured")
    max_batch_size: int = _f(64, lo=1)
    pad_multiple: int = _f(16, lo=1, hi=1024, help="bucket lengths are multiples of this")
    max_buckets: int = _f(8, lo=1, hi=64, help="mel-length buckets (shapes = buckets x sizes)")
    ref_seconds: float = _f(3.0, lo=1.0, hi=10.0, help="reference clip for voice cloning")
    num_workers: int = _f(2, lo=0, hi=256)
    prefetch_factor: int = _f(4, lo=1, hi=64)
    pin_memory: bool = _f(True)
    on_the_fly: bool = _f(False, help="read raw audio and compute mels on the device")
    pseudo_speakers: int = _f(0, lo=0, hi=8, help="prepare: each training voice also at this many "
                              "speeds (0.9, 1.1, 0.8, 1.2, ...), each a new voice with its own "
                              "references: more voices for the reference encoder to learn from")

    @property
    def fixed_budget(self) -> int:
        """The frame budget where no GPU memory is measured: ``frame_budget``, or
        ``base_frame_budget`` when it is ``auto`` (``train.build`` sizes ``auto`` on a GPU)."""
        return self.base_frame_budget if self.frame_budget == "auto" else self.frame_budget


@dataclass
class ModelConfig:
    d_model: int = _f(256, lo=16)
    n_heads: int = _f(4, lo=1)
    text_layers: int = _f(4, lo=1)
    decoder_layers: int = _f(6, lo=1)
    ff_mult: int = _f(4, lo=1, hi=16)
    dropout: float = _f(0.1, lo=0.0, hi=0.9)
    ref_channels: int = _f(256, lo=8, help="reference encoder conv width")
    n_latents: int = _f(32, lo=1, hi=256, help="perceiver resampler latents")
    ref_layers: int = _f(2, lo=1, hi=16, help="perceiver resampler layers")
    ref_dropout: float = _f(0.1, lo=0.0, hi=1.0, help="share of training samples without a "
                            "reference: learns the neutral voice used when none is given")
    speaker_loss_weight: float = _f(0.1, lo=0.0, help="weight of a contrastive loss asking one "
                                    "speaker's conditioning latents to lie nearer each other than "
                                    "another speaker's: without it, training on the demo corpus "
                                    "lost the reference early at most seeds and for good at one "
                                    "of four (0: off; one speaker gives it nothing to compare)")
    ref_self_keys: bool = _f(False, help="the resampler's latents attend to themselves beside "
                             "the reference's features, as Flamingo's and XTTS's do: on the demo "
                             "corpus it let training stop hearing the reference (model files "
                             "before format 5)")
    speaker_embedding: str = _f("none", choices=["none", "ge2e", "auto"], help="ge2e: condition also on the "
                                "reference's GE2E embedding (an encoder trained on 8,371 voices; needs "
                                "resemblyzer), one more latent beside the learned ones; auto: ge2e where "
                                "resemblyzer is installed, else none (the model file keeps which)")
    decoder: str = _f("duration", choices=["autoregressive", "duration"],
                      help="duration: every frame at once from aligned text and learned token "
                      "durations (the one that says new sentences); autoregressive: XTTS's mel "
                      "decoder, each step fed its previous frames")
    frame_position: str = _f("token", choices=["local", "token", "absolute"],
                             help="duration decoder: how a frame knows where it is. token: each "
                             "layer's feed-forward convolves over frame_kernel frames, and each frame carries "
                             "its index within its token (DurIAN), with no position in the "
                             "utterance, so a frame off by one in the predicted durations still "
                             "sounds its phone; local: the convolutions alone (model files of "
                             "format 4 mostly); absolute: the frame's sinusoidal position in the "
                             "utterance and a position-wise feed-forward (model files before "
                             "format 4)")
    frame_kernel: int = _f(3, lo=1, hi=31, help="duration decoder with frame_position local or token: "
                           "how many frames each layer's feed-forward convolves over (odd; FastPitch's 3, "
                           "FastSpeech 2's 9)")
    prenet_dim: int = _f(256, lo=8)
    prenet_dropout: float = _f(0.5, lo=0.0, hi=0.9, help="kept on at inference")
    reduction: int = _f(2, lo=1, hi=8, help="mel frames per decoder step")
    postnet_channels: int = _f(256, lo=8)
    postnet_layers: int = _f(5, lo=1)
    stop_pos_weight: float = _f(8.0, lo=0.0)
    guided_attn_sigma: float = _f(0.2, lo=0.01, hi=1.0)
    guided_attn_weight: float = _f(1.0, lo=0.0)
    align_layer: int = _f(0, lo=-64, hi=63, help="decoder layer whose text cross-attention is "
                          "guided to the diagonal and reported as the alignment (<0: from the end)")
    max_decoder_steps: int = _f(1000, lo=1, help="inference cap, in decoder steps")
    stop_threshold: float = _f(0.5, lo=0.0, hi=1.0)


@dataclass
class VocoderConfig:
    segment_frames: int = _f(32, lo=MIN_SEGMENT_FRAMES, help="mel frames per training segment")
    lr: float = _f(2e-4, lo=0.0, help="AdamW rate: 1e-3 fit the spectrum faster but said the held-out "
                   "sentences worse (benchmarks/results/2026-11-25-vocoder-cpu.md)")
    mel_loss_weight: float = _f(45.0, lo=0.0, help="weight of the log-mel L1 loss")
    stft_loss_weight: float = _f(45.0, lo=0.0, help="weight of the multi-resolution STFT loss")
    magnitude_prior: bool = _f(True, help="the head predicts each bin's log-magnitude as a correction "
                               "of the one the mel itself gives (audio.magnitude_from_mel), not from "
                               "nothing: 3,000 steps read the held-out clips as well as Griffin-Lim "
                               "(benchmarks/results/2026-11-29-vocoder-prior-cpu.md; model files before "
                               "format 6: off)")


@dataclass
class TrainConfig:
    max_steps: int = _f(10000, lo=1)
    time_budget_s: float = _f(0.0, lo=0.0, help="stop (and checkpoint) after this much wall time; 0: none. "
                                "The cosine schedule then holds the peak rate and decays over the last 20 % of "
                                "the steps the time is expected to allow")
    lr: float = _f(1e-3, lo=0.0)
    schedule: str = _f("cosine", choices=["cosine", "constant"])
    warmup_steps: int = _f(500, lo=0)
    min_lr_ratio: float = _f(0.05, lo=0.0, hi=1.0)
    weight_decay: float = _f(0.01, lo=0.0)
    grad_clip: float = _f(1.0, lo=0.0, help="0 disables clipping")
    grad_accum: int = _f(1, lo=1, hi=1024)
    precision: str = _f("auto", choices=["auto", "fp32", "bf16", "fp16"])
    compile: str = _f("auto", choices=["auto", "off", "default", "cudagraphs", "regional"],
                      help="auto: inductor + CUDA graphs on a GPU (no graphs under DDP), eager on a CPU; "
                           "regional: only the transformer blocks, one compile for every shape")
    compile_beside: str = _f("auto", choices=["auto", "on", "off"],
                             help="compile the step in a second process and train eagerly until it "
                                  "is done, instead of waiting for it; auto: on a single CUDA GPU "
                                  "whose run has no compiled kernels yet")
    compile_cache: str = _f("", help="folder for compiled kernels; empty: $MYXTTS_COMPILE_CACHE "
                                     "or ~/.cache/myxtts/compile")
    aligner_on_host: bool = _f(False, help="duration decoder on a CUDA GPU: run the alignment search and its "
                               "CTC loss on the CPU instead of as Triton kernels (two copies to the host and a "
                               "host sync per step, no CUDA graphs), for a Triton that cannot build them")
    recompute: bool = _f(False, help="recompute each transformer block in the backward pass instead of "
                                     "keeping its activations: less memory, more compute")
    freeze: str = _f("", help="acoustic model parts whose weights stay as they are, comma-separated "
                              "(text_encoder, ref_encoder, decoder, or a dotted part such as "
                              "decoder.postnet): for fine-tuning; empty: train every weight")
    seed: int = _f(1234)
    deterministic: bool = _f(False)
    log_every: int = _f(50, lo=1)
    checkpoint_every: int = _f(1000, lo=1)
    keep_last: int = _f(3, lo=1)
    val_every: int = _f(1000, lo=1)
    sample_every: int = _f(5000, lo=1)
    eval_every: int = _f(0, lo=0, help="acoustic stage: score 8 held-out sentences with an offline ASR "
                                       "(WER/CER) every N steps; needs pip install 'myxtts[eval]'; 0: off")
    max_nonfinite: int = _f(20, lo=1, help="consecutive skipped steps before giving up")
    stall_timeout_s: float = _f(300.0, lo=0.0, help="under torchrun: when no rank has moved on for this "
                                "long and some rank is behind or gone, every rank names it and exits 69 "
                                "(the first step, which may compile, is not counted); 0: off")


@dataclass
class Config:
    audio: AudioConfig = field(default_factory=AudioConfig)
    text: TextConfig = field(default_factory=TextConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    vocoder: VocoderConfig = field(default_factory=VocoderConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        from myxtts.files import write_text

        write_text(path, yaml.safe_dump(self.to_dict(), sort_keys=False))


# --------------------------------------------------------------------------------- building

# Of the settings taken out (config_values.REMOVED), the ones a saved config (a run's, a model
# file's header) of an older version may hold and that no longer change anything a run of it
# does: an acoustic model trained before the vocoder changed still loads and resumes. Named by
# hand, they are errors.
OUTDATED = {("vocoder", "preset"), ("vocoder", "fm_loss_weight")}


def upgrade(data: dict) -> dict:
    """A saved config of an older version → one of this version (``OUTDATED`` dropped)."""
    out = dict(data or {})
    for section, key in OUTDATED:
        if isinstance(out.get(section), dict) and key in out[section]:
            out[section] = {k: v for k, v in out[section].items() if k != key}
    return out


# Settings added after runs began saving their config, each with the value that reproduces what
# came before it: a saved config (a run's config.yaml, a model file's header) that lacks one was
# written before it existed and meant that value, whatever today's default. Model files before
# format 4 had no frame_position (all "absolute"), before 5 no ref_self_keys (latents attended
# to themselves), vocoder files before 6 no magnitude_prior; frame_kernel came without a version.
BEFORE = {"model": {"frame_kernel": 3, "frame_position": "absolute", "ref_self_keys": True},
          "vocoder": {"magnitude_prior": False}}


def settings_before(data: dict, section: str) -> dict:
    """``data`` with the settings of ``section`` it lacks set to what they were before (BEFORE)."""
    saved = data.get(section, {})
    if not isinstance(saved, dict):
        return data
    return {**data, section: {**BEFORE[section], **saved}}


def _validate_cross(cfg: Config) -> None:
    a, d, m = cfg.audio, cfg.data, cfg.model
    if a.win_length > a.n_fft:
        raise ConfigError(f"audio.win_length ({a.win_length}) must not exceed audio.n_fft ({a.n_fft})")
    if a.fmax and a.fmax > a.sample_rate / 2:
        raise ConfigError(f"audio.fmax ({a.fmax}) is above the Nyquist frequency {a.sample_rate / 2}")
    if d.min_seconds >= d.max_seconds:
        raise ConfigError("data.min_seconds must be below data.max_seconds")
    if m.d_model % m.n_heads:
        raise ConfigError(f"model.d_model ({m.d_model}) must be divisible by model.n_heads ({m.n_heads})")
    if m.frame_kernel % 2 == 0:
        raise ConfigError(f"model.frame_kernel ({m.frame_kernel}) must be odd: an even kernel would "
                          "shift every frame by half a frame")
    if d.pad_multiple % m.reduction:
        raise ConfigError(f"data.pad_multiple ({d.pad_multiple}) must be a multiple of "
                          f"model.reduction ({m.reduction})")


def from_dict(data: dict) -> Config:
    cfg = build(Config, data or {}, "")
    _validate_cross(cfg)
    return cfg


def parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(f"override '{item}' is not of the form section.key=value")
    key, raw = item.split("=", 1)
    try:
        return key.strip().split("."), yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"{key.strip()}: cannot read the value {raw!r} ({_yaml_problem(e)})") from None


def _yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML error on one line: what, and where (1-based)."""
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{getattr(e, 'problem', None) or type(e).__name__}{where}"


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``section.key=value`` strings to a nested dict (values parsed as YAML scalars)."""
    for item in overrides or []:
        path, value = parse_override(item)
        node, schema = data, Config
        for i, part in enumerate(path):
            fields_ = {f.name: f for f in dataclasses.fields(schema)}
            if part not in fields_:
                raise unknown(".".join(path), part, fields_, f" in {'.'.join(path[:i]) or 'config'}")
            if i == len(path) - 1:
                if dataclasses.is_dataclass(typing.get_type_hints(schema)[part]):
                    raise ConfigError(f"'{'.'.join(path)}' is a section; set one of its keys")
                node[part] = value
            else:
                schema = typing.get_type_hints(schema)[part]
                if not dataclasses.is_dataclass(schema):
                    raise ConfigError(f"'{'.'.join(path[:i + 1])}' is not a section")
                node = node.setdefault(part, {})
    return data


def load(path: str | Path | None = None, overrides: list[str] | None = None, saved: bool = False) -> Config:
    """Load a YAML file (or the defaults when ``path`` is None) and apply overrides. ``saved``:
    the file is a run's own config.yaml, which may be of an older version (:func:`upgrade`)."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            preset = PRESETS_DIR / f"{path}.yaml"
            if preset.is_file():
                p = preset
            else:
                raise ConfigError(f"config file not found: {path}")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: not valid YAML: {_yaml_problem(e)}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{p}: not UTF-8 text; save it as UTF-8") from None
    if saved:  # of an older version, perhaps: what it lacks means what that version did
        data = settings_before(settings_before(upgrade(data), "model"), "vocoder")
    return from_dict(apply_overrides(data, overrides or []))
