"""The run record: the typed schema of everything a run writes into its run directory.

Scenarios, faults, observation, the workload and the reports all write and read a run
directory through this package (`runrecord.rundir.RunDir`), so that a field has one name
and one type everywhere, and a file written by another schema version is refused with an
error naming it.

The schedule files `logfork replay` runs and `logfork explore` writes are part of the
record too (`runrecord.schedule`): versioned by their own `format` field, refused with a
`ScheduleError` that names the file and every bad field.
"""
