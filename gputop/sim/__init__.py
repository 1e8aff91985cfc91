"""The simulated cluster and what plays it: the demo's source and actions, the fake nvidia-smi (MIG
included), and the fake fleet that serves simulated nodes over SSH. Above the real I/O of
gputop.sources, which never imports anything from here."""
