"""The ground floor: what every other folder shares and nothing here imports from them: the
errors every command prints as one paragraph (errors), the protocol generations and
partition states the checkers reason about (protocol), what each Kafka release does
(releases), where the checkout is (paths) and how work on several clusters at once is
waited for (threads). Standard library only: `.ci/run` uses it with the system Python, before the
virtualenv exists."""
