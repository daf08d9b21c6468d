"""Multi-agent RL: batched multi-agent envs and MAPPO/IPPO on a group of agents (a training family, like
``control``; its ``check`` and ``eval``/``export`` variants live in ``rlpilot.check.group`` and
``rlpilot.play.group``)."""
