"""gputop: a terminal dashboard for GPU clusters."""

__version__ = "0.1.0"
