"""The exit codes every logfork command shares; the exit-code table in docs/cli.md says
which of them it uses and what each means there."""

from __future__ import annotations

OK = 0  # as the KIP says / every invariant held / consistent / the answer agrees
FINDING = 1  # not as the KIP says / an invariant violated / diverged / disagrees
USAGE = 2  # logfork could not run: bad input, no Docker engine, unknown release
NO_VERDICT = 3  # not reached / ambiguous: there is nothing to judge, run it again
NOT_APPLICABLE = 4  # the scenario does not apply to that release or mode
