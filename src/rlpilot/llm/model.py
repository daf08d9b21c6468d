"""Causal LMs and tokenizers: the tiny model built in code, and any local Hugging Face model directory.

Nothing is downloaded: ``llm.model=tiny`` builds a 2-layer Qwen2 from ``Qwen2Config`` and a
character-level tokenizer (``tokenizers`` WordLevel wrapped in ``PreTrainedTokenizerFast``); any
other value must be a local directory written by ``save_pretrained`` (config.json + weights +
tokenizer files). Qwen2 is used because TorchRL's ``TransformersWrapper`` passes the attention mask
as the second positional argument of ``forward``, which GPT-2 takes as ``past_key_values``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from rlpilot.common.errors import UserError
from rlpilot.common.files import read_json
from rlpilot.llm import require_transformers

# every character a task prompt or answer can hold; ids 0-2 are the special tokens
CHARACTERS = "0123456789+-*=?:;,.()<> abcdefghijklmnopqrstuvwxyz"
PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"


def build_char_tokenizer():
    """A character-level fast tokenizer built locally: one id per character, ``<eos>`` ends an answer.

    Decoding concatenates characters (``decoders.Fuse``), so ``decode(encode(text)) == text``: TorchRL
    re-tokenises ``prompt + response`` text when it scores a response, and gets the sampled tokens back.
    """
    require_transformers()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {PAD: 0, EOS: 1, UNK: 2}
    for char in CHARACTERS:
        vocab[char] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=EOS, unk_token=UNK)


def qwen2_config(
    *,
    vocab_size: int,
    hidden_size: int,
    layers: int,
    heads: int,
    kv_heads: int,
    intermediate_size: int,
    max_positions: int,
    pad_token_id: int,
    eos_token_id: int,
):
    """A Qwen2 architecture sized by the caller (the tiny CPU model, or Qwen2-0.5B's shape in benchmarks)."""
    require_transformers()
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=eos_token_id,
        tie_word_embeddings=True,
    )


def build_tiny_model(tokenizer, *, hidden_size: int, layers: int, seed: int):
    """A randomly initialised Qwen2 causal LM for the character tokenizer (77,696 parameters at
    hidden 64, 2 layers): small enough that SFT + GRPO run in minutes on one CPU core."""
    from transformers import Qwen2ForCausalLM

    config = qwen2_config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        layers=layers,
        heads=4,
        kv_heads=2,
        intermediate_size=2 * hidden_size,
        max_positions=64,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval()


def save_model(model, tokenizer, path: str | Path) -> Path:
    """Writes a directory that :func:`load_model` (and ``from_pretrained``) reads: config, safetensors, tokenizer."""
    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


MODEL_SIZES = ("hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size")


def model_sizes(path: str | Path) -> dict[str, int]:
    """A local model's sizes (:data:`MODEL_SIZES`) from its ``config.json``, read as data (no weights, no code)."""
    advice = "give a folder written by save_pretrained, or llm.model=tiny"
    try:
        config = read_json(Path(path) / "config.json", advice)
    except OSError:
        raise UserError(f"llm.model={path}: not a Hugging Face model directory (no config.json); {advice}") from None
    sizes = config.get("text_config", config) if isinstance(config, dict) else {}
    if not all(isinstance(sizes.get(key), int) and sizes[key] > 0 for key in MODEL_SIZES):
        raise UserError(f"llm.model={path}: its config.json does not give {', '.join(MODEL_SIZES)}; {advice}")
    return {key: sizes[key] for key in MODEL_SIZES}


def load_model(path: str | Path, *, dtype: torch.dtype = torch.float32):
    """Loads a local Hugging Face causal LM and its tokenizer; a path that is not one is a UserError."""
    require_transformers()
    path = Path(path)
    if not (path / "config.json").is_file():
        raise UserError(
            f"llm.model={path}: not a Hugging Face model directory (no config.json); give a folder written by "
            "save_pretrained, or llm.model=tiny"
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"llm.model={path}: cannot load a causal LM and tokenizer from it ({first})") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if model.generation_config.eos_token_id is None:
        model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval(), tokenizer
