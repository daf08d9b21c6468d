"""The training loop (``trainer``), what surrounds it once per run (``lifecycle``), the protocol
trainables implement (``trainable``), the counters and status lines it keeps (``monitor``), the TorchRL
loggers it feeds (``loggers``) and the helper process that draws the end-of-run curve (``curve_helper``)."""
