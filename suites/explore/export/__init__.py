"""A replayed schedule as a shell script that needs no logfork: the same cluster from a plain
Kafka distribution's jars, the same steps through Kafka's own tools and standard Linux
commands, each step's wait a condition polled, and the symptom checked with Kafka's tools.

Each step family registers its exporter (registry); script.py writes the whole."""
