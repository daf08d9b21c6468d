"""Trained policies, back from disk: ``load`` (a run's policy or an exported artifact) and ``episodes``
(greedy episodes, per-episode CSV, video)."""
