"""The one way MyXTTS prints a measured figure that may be missing."""
from __future__ import annotations

MISSING = "n/a"


def fmt(value, spec: str = "{:.1f}", missing: str = MISSING) -> str:
    """``value`` formatted with ``spec``, or ``missing`` when it was not measured (None)."""
    return missing if value is None else spec.format(value)
