"""What a diagnosis says: a ``Finding`` (one problem, the number behind it, one action), the
``Diagnosis`` (the verdict and its findings) and the order findings rank in.

Apart from the rules that make them (``observe.diagnose``), because the doctor's own checks
(``observe.machine``) speak in the same findings and rank them with the diagnosis's.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from myxtts.observe.format import findings_text

SEVERITIES = ("high", "medium", "low", "info")
_PARENS = re.compile(r" \([^()]*\)")


@dataclass
class Finding:
    severity: str      # one of SEVERITIES
    title: str
    evidence: str      # the numbers and the threshold they crossed
    action: str        # the exact key=value or command to try
    rule: str = ""     # stable id, for tests and for grouping in reports
    impact: float = 0.0  # estimated share of step time at stake (%), ranks findings of one severity


@dataclass
class Diagnosis:
    # cpu | input-bound | compiling | idle | launch-bound | compute-bound | kernel-bound | busy | unknown
    bound: str
    reason: str        # a sentence with the numbers behind the verdict
    findings: list[Finding] = field(default_factory=list)

    @property
    def top(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def as_dict(self) -> dict:
        return {"bound": self.bound, "reason": self.reason, "headline": self.headline(),
                "findings": [asdict(f) for f in self.findings]}

    def headline(self) -> str:
        """The verdict in one line: what bounds the run, the numbers, and what to try first (the
        first finding's action without its explanations in brackets)."""
        top = next((f for f in self.findings if f.severity != "info"), None)
        if top is None:
            return f"{self.bound}: {self.reason}"
        lead = "try" if top.action.startswith("`") else "next:"
        return f"{self.bound}: {self.reason}; {lead} {_PARENS.sub('', top.action)}"

    def text(self) -> str:
        return "\n".join([f"verdict: {self.headline()}"]
                         + ([findings_text([asdict(f) for f in self.findings])] if self.findings else []))


def ranked(findings: list[Finding]) -> list[Finding]:
    """Most severe first, and within a severity the most step time at stake first."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), -f.impact))
