"""The I/O boundary: everything that reads a real node or Slurm (SSH, NVML, the Slurm commands)."""
