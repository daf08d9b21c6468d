"""Supervised warm-up (SFT): teach the answer format before RL, so sampled groups hold some reward.

Plain next-token cross-entropy on ``prompt + target + eos`` with the prompt tokens masked out.
TorchRL's ``SFTLoss`` works on chat ``History`` objects (chat templates), which a bare
character-level tokenizer has no use for; the loss here is the same masked cross-entropy.
"""

from __future__ import annotations

import random

import torch

from rlpilot.common import stopping
from rlpilot.llm.tasks import Task


def sft_batch(tokenizer, prompts: list[str], answers: list[str], device: torch.device) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``/``attention_mask`` and ``labels`` (-100 on prompt and padding)."""
    rows, labels = [], []
    for prompt, answer in zip(prompts, answers):
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt_ids + answer_ids)
        labels.append([-100] * len(prompt_ids) + answer_ids)
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)
    attention_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=device)
    label_ids = torch.tensor([lab + [-100] * (width - len(lab)) for lab in labels], device=device)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": label_ids}


def sft_warmup(model, tokenizer, task: Task, *, steps: int, lr: float, batch_size: int, seed: int) -> list[float]:
    """``steps`` Adam steps on batches of training prompts; returns the loss of each step."""
    if steps <= 0:
        return []
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    rng = random.Random(seed)
    losses = []
    for _ in range(steps):
        if stopping.requested():  # SIGINT/SIGTERM during the warm-up: training stops before its first batch
            break
        prompts = rng.choices(task.train_prompts, k=batch_size)
        batch = sft_batch(tokenizer, prompts, [task.sft_example(p) for p in prompts], device)
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses
