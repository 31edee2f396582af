"""conformance.json: each statement of a KIP, what the release did, conforms or departs."""

from __future__ import annotations

from dataclasses import dataclass, field

CONFORMS, DEPARTS, VIOLATED = "conforms", "departs", "violated"


@dataclass
class Statement:
    statement: str
    observed: str
    verdict: str  # conforms, departs or violated
    implemented: bool = True  # a violated statement that Kafka implements fails the scenario


@dataclass
class Conformance:
    kip: str
    statements: list[Statement] = field(default_factory=list)

    def table(self) -> str:
        width = max((len(r.statement) for r in self.statements), default=10)
        lines = [f"{self.kip + ' statement':{width}}  {'verdict':15}  observed"]
        lines += [f"{r.statement:{width}}  {r.verdict:15}  {r.observed}" for r in self.statements]
        return "\n".join(lines)
