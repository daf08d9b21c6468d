"""Prompt sets with programmatic rewards in [0, 1]: what ``grpo-<task>`` presets train on.

A task splits its prompts once, by a fixed permutation, into training prompts (sampled by GRPO) and
held-out prompts (greedy evaluation: ``eval/return_mean``), and scores a response with plain Python.
A response is the generated text up to the end-of-sequence token; a response that never emits it
(ran out of ``llm.max_new_tokens``) is unfinished and fails the format check.
"""

from __future__ import annotations

import abc
import random
from dataclasses import dataclass

from rlpilot.common.errors import UserError

HELDOUT_SEED = 1234  # the split never depends on the training seed: every run is evaluated on the same prompts


def split_answer(response: str, eos: str) -> tuple[str, bool]:
    """The answer text and whether the model finished it with ``eos``."""
    answer, found, _ = response.partition(eos)
    return answer, bool(found)


def exact_answer(answer: str, finished: bool, target: str) -> float:
    """1 when the finished answer equals the target exactly, else 0."""
    return float(finished and answer.strip() == target)


def format_ok(answer: str, finished: bool, allowed: str) -> float:
    """1 when the answer is finished, non-empty and uses only ``allowed`` characters."""
    return float(finished and len(answer) > 0 and all(c in allowed for c in answer))


def target_length(answer: str, finished: bool, target: int) -> float:
    """1 at exactly ``target`` characters, falling linearly to 0 at twice (or zero times) the target."""
    if not finished:
        return 0.0
    return max(0.0, 1.0 - abs(len(answer) - target) / target)


def position_matches(answer: str, finished: bool, target: str) -> float:
    """Share of the target's characters found at their position in the finished answer; an answer longer
    than the target loses the share of its extra characters."""
    if not finished:
        return 0.0
    right = sum(a == t for a, t in zip(answer, target))
    return max(0.0, (right - max(0, len(answer) - len(target))) / len(target))


@dataclass
class Task(abc.ABC):
    """Prompts, their targets and the reward; ``sft_example`` is the answer the warm-up teaches."""

    name: str
    train_prompts: list[str]
    heldout_prompts: list[str]
    targets: dict[str, str]
    description: str

    def reward(self, prompt: str, response: str, eos: str) -> float:
        answer, finished = split_answer(response, eos)
        return self._score(prompt, answer, finished)

    @abc.abstractmethod
    def _score(self, prompt: str, answer: str, finished: bool) -> float:
        """The reward in [0, 1] of ``answer`` (the response up to end-of-sequence) to ``prompt``."""

    def sft_example(self, prompt: str) -> str:
        return self.targets[prompt]


class Arithmetic(Task):
    """``a+b=`` with one-digit operands: reward 1 for the exact sum followed by end-of-sequence."""

    def _score(self, prompt: str, answer: str, finished: bool) -> float:
        return exact_answer(answer, finished, self.targets[prompt])


class Length(Task):
    """``len N:`` asks for N lowercase letters: target-length reward times a letters-only format check."""

    def _score(self, prompt: str, answer: str, finished: bool) -> float:
        letters = "abcdefghijklmnopqrstuvwxyz"
        return target_length(answer, finished, int(prompt[4:-1])) * format_ok(answer, finished, letters)


class Reverse(Task):
    """``abc>`` asks for the letters reversed (``cba``): reward = share of positions right, 0 if unfinished."""

    def _score(self, prompt: str, answer: str, finished: bool) -> float:
        return position_matches(answer, finished, self.targets[prompt])


def _split(prompts: list[str], heldout: int) -> tuple[list[str], list[str]]:
    order = list(prompts)
    random.Random(HELDOUT_SEED).shuffle(order)
    return order[heldout:], order[:heldout]


def arithmetic() -> Arithmetic:
    prompts = [f"{a}+{b}=" for a in range(10) for b in range(10)]
    train, heldout = _split(prompts, 20)
    targets = {p: str(int(p[0]) + int(p[2])) for p in prompts}
    return Arithmetic(
        "arithmetic", train, heldout, targets, "one-digit addition, exact answer (100 prompts, 20 held out)"
    )


def length() -> Length:
    prompts = [f"len {n}:" for n in range(1, 10)]
    train, heldout = _split(prompts, 2)
    # the warm-up answer is a fixed letter run; RL rewards any letters of the right length
    targets = {p: "abcdefghi"[: int(p[4:-1])] for p in prompts}
    return Length("length", train, heldout, targets, "N lowercase letters for 'len N:' (9 prompts, 2 held out)")


def reverse() -> Reverse:
    letters = "abcdef"
    prompts = [f"{a}{b}{c}>" for a in letters for b in letters for c in letters]
    train, heldout = _split(prompts, 40)
    targets = {p: p[:3][::-1] for p in prompts}
    return Reverse("reverse", train, heldout, targets, "reverse 3 letters of a-f (216 prompts, 40 held out)")


TASKS = {"arithmetic": arithmetic, "length": length, "reverse": reverse}


def make_task(name: str) -> Task:
    if name not in TASKS:
        raise UserError(f"llm.task '{name}' is unknown (choose from {', '.join(TASKS)})")
    return TASKS[name]()
