"""The engine of `logfork explore` and `logfork replay`: a ranked queue of candidates
(explorer) run on benches, clusters reused across schedules (bench, clusters), one
schedule at a time each (schedule_run: the steps, the heal, the evidence copied and
observed, the judges asked); on this machine's threads, or as shards on a Spark cluster's
workers (spark, shard), one backend under the same engine."""
