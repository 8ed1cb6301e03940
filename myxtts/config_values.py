"""A settings section built from a mapping (a YAML file, overrides): each value's type checked and
gently converted, its range and choices checked, and an unknown name answered with the closest
known one, or with what to do instead where the setting was taken out. The sections themselves
are :mod:`myxtts.config`'s.
"""
from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names the key."""


# Settings that were taken out: every run folder's config.yaml lists all settings of the version
# that wrote it, so naming one gets what to do instead of a guess at a similar name.
REMOVED = {"data.budget_mode": "batch sizes always follow its former linear rule, B x Tm <= "
                               "data.frame_budget; delete the setting",
           "vocoder.preset": "the vocoder has one size (2.8 M parameters); delete the setting",
           "vocoder.fm_loss_weight": "the vocoder trains without a discriminator; delete the setting"}


def _closest(name: str, options) -> str:
    match = difflib.get_close_matches(name, list(options), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""


def unknown(full: str, name: str, options, where: str = "") -> ConfigError:
    """The error for setting ``full``, whose part ``name`` is not one of ``options``."""
    if full in REMOVED:
        return ConfigError(f"{full} was removed: {REMOVED[full]}")
    return ConfigError(f"unknown setting '{full}'{where}" + _closest(name, options))


def _coerce(value: Any, typ, key: str):
    """Check (and gently convert) ``value`` to ``typ``; raise ConfigError naming ``key``."""
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "1", "on", "false", "no", "0", "off"):
            return value.lower() in ("true", "yes", "1", "on")
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or (
                isinstance(value, str) and not value.strip().lstrip("-").isdigit()):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return int(value)
    if typ is float:
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if typ is str:
        if isinstance(value, bool):  # YAML 1.1 reads a bare `off`/`on` as a boolean
            return "on" if value else "off"
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return str(value)
    raise ConfigError(f"{key}: unsupported type {typ}")  # pragma: no cover - schema bug


def _check_range(value, meta: dict, key: str):
    lo, hi, choices = meta.get("lo"), meta.get("hi"), meta.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(str, choices))}"
                          + _closest(str(value), choices))
    if lo is not None and value < lo:
        raise ConfigError(f"{key}: {value} is below the minimum {lo}")
    if hi is not None and value > hi:
        raise ConfigError(f"{key}: {value} is above the maximum {hi}")


def build(cls, data: dict, prefix: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            raise unknown(full, key, names)
        typ = hints[key]
        if dataclasses.is_dataclass(typ):
            kwargs[key] = build(typ, value or {}, full + ".")
        elif names[key].metadata.get("auto") and value == "auto":
            kwargs[key] = "auto"
        else:
            try:
                v = _coerce(value, int if names[key].metadata.get("auto") else typ, full)
            except ConfigError as e:
                raise ConfigError(f"{e} (or auto)" if names[key].metadata.get("auto") else str(e)) from None
            _check_range(v, names[key].metadata, full)
            kwargs[key] = v
    return cls(**kwargs)
