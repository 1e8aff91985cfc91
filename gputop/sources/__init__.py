"""The I/O boundary: everything that reads a node, Slurm, or the simulator lives here."""
