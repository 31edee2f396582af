"""The judges of a schedule's run: pure functions of what the run recorded. `judge` names
the invariant a run broke, if any; `comparison` sets the protocol model's prediction beside
it, told what the run saw; `invariants` are the checks of the copied logs that the audit
does not make (the metadata log's copies, leader epochs going back)."""
