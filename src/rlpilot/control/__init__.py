"""Single-agent control: envs, a batched collector, PPO, DQN, SAC and TD3, greedy evaluation."""
