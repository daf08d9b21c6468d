"""The training loop (``trainer``), what surrounds it once per run (``lifecycle``), the protocol
trainables implement (``trainable``) and the counters and status lines it keeps (``monitor``)."""
