"""Trained policies, back from disk (``rlpilot eval`` and ``rlpilot export``): ``load`` (a run's policy or an
exported artifact), ``episodes`` (greedy episodes, per-episode CSV, video), ``write`` (ONNX / pt2 /
TorchScript, parity-checked), ``export`` (a run's policy as a deployable module), ``group`` (the same for a
multi-agent group policy) and ``llm`` (an LLM run's held-out answers)."""
