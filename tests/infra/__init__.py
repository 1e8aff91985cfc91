"""Real servers on loopback for tests and benchmarks, started and stopped by the code that needs them."""
