"""LoCoMo retrieval evaluation of memvm's memory (issue 29): `bench/run.sh eval`, or
`python3 -m bench.eval --base-url ... --data-dir ...` against a running `memvm serve`."""
