"""Multi-agent RL: batched multi-agent envs and MAPPO/IPPO on a group of agents."""
