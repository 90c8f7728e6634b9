"""Cost and speed of the dispatcher against its baselines, on the embedded emulator (`make bench`)."""
