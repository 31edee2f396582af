"""The outcome of a run: one type for the scenarios, the verdicts, the reports and the index."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    CONSISTENT = "consistent"  # replicas agree and no acknowledged write was lost
    REPRODUCED = "reproduced"  # the known bug showed, on a release before its fix
    DEPARTS = "departs"  # the release departs from the KIP's text, as logfork documents
    DIVERGED = "diverged"  # replicas diverged or data was lost where the release should not
    NOT_REACHED = "not-reached"  # the scenario could not create the state it needs
    NOT_APPLICABLE = "not-applicable"  # the release or mode lacks what the scenario tests
    SETUP_FAILED = "setup-failed"  # the cluster could not start: no engine, no image, ...

    @property
    def has_verdict(self) -> bool:
        """Whether the run judged anything: a run that did not reach its state, does not
        apply, or could not start says nothing either way."""
        return self not in (Outcome.NOT_REACHED, Outcome.NOT_APPLICABLE, Outcome.SETUP_FAILED)

    @property
    def label(self) -> str:
        return self.value.upper().replace("-", " ")
