"""``rlpilot check``: preflight of an env before training. ``env`` checks a single-agent env (specs in words,
rollout layout, random-policy statistics within a time budget, pitfalls as findings); ``group`` a
multi-agent one (the group layout, where the agent dimension sits, the pitfalls of multi-agent training).
"""
