"""What the fault harness, the other tests and the benchmark share: test worlds and the in-memory AWS."""
