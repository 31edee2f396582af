"""The KRaft quorum's membership steps in an exported script: not yet. A script formats a
static quorum (controller.quorum.voters); one that adds, removes or wipes voters needs its
controllers formatted as a dynamic quorum (--initial-controllers, KIP-853) first."""

from runrecord.steps.voters import AddVoter, RemoveVoter, WipeVoter
from suites.explore.export.registry import cannot_export

WHY = "a script formats a static quorum; one for a dynamic quorum (KIP-853) is not written yet"
for kind in (AddVoter, RemoveVoter, WipeVoter):
    cannot_export(kind, WHY)
