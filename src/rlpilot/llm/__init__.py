"""RL fine-tuning of causal language models (GRPO) on TorchRL's LLM stack.

``model`` builds or loads a Hugging Face causal LM and its tokenizer (a tiny one is built in code,
never downloaded), ``tasks`` holds prompts and programmatic rewards, ``sft`` the supervised warm-up,
``grpo`` the sampling/scoring/loss step and the training loop behind ``rlpilot train grpo-<task>``.
Everything here needs the ``[llm]`` extra (transformers, tokenizers); :func:`require_transformers`
turns its absence into one line.
"""

from __future__ import annotations

from rlpilot.common.errors import UserError


def require_transformers() -> None:
    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        raise UserError("LLM runs need transformers and tokenizers: pip install 'rlpilot[llm]'") from None
