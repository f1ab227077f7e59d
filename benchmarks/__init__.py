"""Runnable benchmarks of m3 (retrieval quality and performance)."""
