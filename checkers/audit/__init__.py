"""The audit: judge every partition found in copies of broker log dirs.

One audit, in three stages that any executor shares:

- `plan`: the inputs (broker log dirs, or run directories that expand to their nodes' log
  dirs) listed down to their partition dirs: one read task per replica, and the slots of
  the error list in the order the audit reports errors. No segment is opened.
- `read`: a read task to a `Lineage` (and a metadata-log task to a `MetadataLog`).
- `decide`: the current leaders (the KRaft metadata log, or the quorum-state for the
  metadata log itself), each partition's judgement, and the assembly of the result.

`local.audit` executes the reads in this process, one partition at a time; the report
pipeline executes them in Spark tasks (`reports.spark_engine`). Only how the read tasks
run differs, so both give the same `AuditResult`.
"""

from checkers.audit.local import audit
from checkers.audit.result import (
    EXIT_CONSISTENT,
    EXIT_DIVERGED,
    EXIT_UNREADABLE,
    AuditError,
    AuditResult,
)

__all__ = [
    "EXIT_CONSISTENT",
    "EXIT_DIVERGED",
    "EXIT_UNREADABLE",
    "AuditError",
    "AuditResult",
    "audit",
]
