"""Actions gputop takes on a cluster (drain, resume): running a planned argv and recording it."""
