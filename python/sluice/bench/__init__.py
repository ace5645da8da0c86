"""sluice-bench: the benchmark harness."""
