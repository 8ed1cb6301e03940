"""The one way MyXTTS prints a measured figure that may be missing, and a list of findings."""
from __future__ import annotations

MISSING = "n/a"


def fmt(value, spec: str = "{:.1f}", missing: str = MISSING) -> str:
    """``value`` formatted with ``spec``, or ``missing`` when it was not measured (None)."""
    return missing if value is None else spec.format(value)


def findings_text(findings: list[dict]) -> str:
    """Numbered findings (``Finding`` as a dict; ``rank`` numbers them where present), each with
    its evidence and action, as every command prints them."""
    lines = []
    for i, f in enumerate(findings, 1):
        lines += [f"{f.get('rank', i)}. [{f['severity']}] {f['title']}", f"   evidence: {f['evidence']}",
                  f"   action:   {f['action']}"]
    return "\n".join(lines)
