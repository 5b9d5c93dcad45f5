"""The modules of bench/search_bench.py (run it through that script)."""
