"""Runnable retrieval and performance benchmarks for m3.

One module per benchmark, each runnable as ``python -m benchmarks.<name>``;
the other modules hold what they share (data loading, ingestion through
m3's write path, search modes, metrics, reporting). See docs/benchmarks.md.
"""
