"""Plumbing every layer may use: errors, safe file writes, redaction of secrets, the stop request, bounds on
what a command may ask for, network endpoints tried before use, TorchRL's first import, and the findings
``check`` and ``doctor`` report. Torch-free; each module imports only the standard library and its siblings
(numpy or torch only inside a function that needs them)."""
