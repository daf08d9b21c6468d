"""DQN on CartPole-v1 in CleanRL's single-file style (cleanrl/dqn.py), with RL Zoo's CartPole settings:
a speed peer of benchmarks/time_to_solve.py (worker ``cleanrl-dqn-zoo``). Imports nothing of rlpilot.

CleanRL's code (QNetwork, linear_schedule, epsilon-greedy collection, a replay buffer, the TD update, a
hard target copy), with the algorithm of the SB3 DQN that the Zoo's settings were tuned for where
CleanRL's defaults differ:

- the Zoo's hyperparameters (``ZOO``; time_to_solve.py passes its own ``SB3_DQN_ZOO``): one env,
  256-256 ReLU (PyTorch's default init, as both), lr 2.3e-3, batch 64, buffer 100k, learning_starts 1000,
  gamma 0.99, epsilon 1.0 -> 0.04 over 16% of the budget;
- SB3's schedule of work: collect ``train_freq`` (256) env steps, then ``gradient_steps`` (128) updates
  once more than ``learning_starts`` frames were collected (CleanRL: one update every 10 steps); the
  target network is copied every ``target_update_interval`` (10) env steps, checked during collection,
  as SB3's ``_on_step`` (with 256-step collections: once per learning phase);
- SB3's loss: Huber (``smooth_l1_loss``; CleanRL: MSE) and gradient-norm clipping at 10 (SB3's
  ``max_grad_norm``; CleanRL: none); Adam with PyTorch's defaults;
- a truncated episode is not terminal: the replay buffer stores the real final observation and
  ``terminated`` as done (SB3's ``handle_timeout_termination``; CleanRL does the same).

Envs: ``gymnasium.vector.SyncVectorEnv`` with one real CartPole-v1 env, as CleanRL, autoresetting in the
same step (the final observation comes in ``infos``): 17 us a step here against 40 us for gymnasium's
numpy-vectorised CartPole with one env. The evaluation uses that vectorised env
(``make_vec(..., vectorization_mode="vector_entry_point")``): 20 envs step 4x faster than a SyncVectorEnv.

    python benchmarks/peers/cleanrl_dqn.py --seed 100   # prints the result dict
"""

from __future__ import annotations

import argparse
import json
import random
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

ENV_ID = "CartPole-v1"
# RL Baselines3 Zoo, hyperparams/dqn.yml, CartPole-v1, in SB3's names: must match SB3_DQN_ZOO in
# benchmarks/zoo.py (the benchmark passes its own dict; this copy is for a standalone run)
ZOO = dict(
    learning_rate=2.3e-3,
    batch_size=64,
    buffer_size=100_000,
    learning_starts=1000,
    gamma=0.99,
    target_update_interval=10,
    train_freq=256,
    gradient_steps=128,
    exploration_fraction=0.16,
    exploration_final_eps=0.04,
    policy_kwargs=dict(net_arch=[256, 256]),
)
# SB3's DQN defaults for what the Zoo leaves unset
SB3_DEFAULTS = dict(exploration_initial_eps=1.0, max_grad_norm=10.0, tau=1.0)


class QNetwork(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, hidden=(256, 256)):
        super().__init__()
        layers, n_in = [], obs_dim
        for n_out in hidden:
            layers += [nn.Linear(n_in, n_out), nn.ReLU()]
            n_in = n_out
        self.network = nn.Sequential(*layers, nn.Linear(n_in, n_actions))

    def forward(self, x):
        return self.network(x)


def linear_schedule(start_e: float, end_e: float, duration: float, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


class ReplayBuffer:
    """Uniform replay over the last ``size`` transitions (numpy storage, torch batches)."""

    def __init__(self, size: int, obs_shape: tuple):
        self.obs = np.zeros((size, *obs_shape), dtype=np.float32)
        self.next_obs = np.zeros((size, *obs_shape), dtype=np.float32)
        self.actions = np.zeros((size, 1), dtype=np.int64)
        self.rewards = np.zeros(size, dtype=np.float32)
        self.dones = np.zeros(size, dtype=np.float32)
        self.size, self.pos, self.full = size, 0, False

    def add(self, obs, next_obs, action, reward, done):
        self.obs[self.pos], self.next_obs[self.pos], self.actions[self.pos] = obs, next_obs, action
        self.rewards[self.pos], self.dones[self.pos] = reward, done
        self.pos = (self.pos + 1) % self.size
        self.full = self.full or self.pos == 0

    def sample(self, batch_size: int):
        idx = np.random.randint(0, self.size if self.full else self.pos, size=batch_size)
        return (
            torch.from_numpy(self.obs[idx]),
            torch.from_numpy(self.actions[idx]),
            torch.from_numpy(self.next_obs[idx]),
            torch.from_numpy(self.rewards[idx]),
            torch.from_numpy(self.dones[idx]),
        )


def evaluate(q_network: nn.Module, envs, seed: int | None) -> float:
    """Greedy mean return of one episode per env (benchmarks/time_to_solve.py's rule: as SB3's
    evaluate_policy with as many envs as episodes; the env is seeded at its first reset only)."""
    obs, _ = envs.reset(seed=seed)
    returns = np.zeros(envs.num_envs)
    done = np.zeros(envs.num_envs, dtype=bool)
    while not done.all():
        with torch.no_grad():
            action = q_network(torch.as_tensor(obs)).argmax(dim=1).numpy()
        obs, reward, terminations, truncations, _ = envs.step(action)
        returns += np.where(done, 0.0, reward)
        done |= terminations | truncations
    return float(returns.mean())


def run(
    seed: int, eval_every: int, budget: int, episodes: int, threshold: float = 475.0, *, hyperparams: dict | None = None
) -> dict:
    """Learn until the greedy evaluation (every ``eval_every`` frames, after the update that used them, its
    time counted) reaches ``threshold``, or the budget: {solved, frames, train_s, last_eval}."""
    hp = {**SB3_DEFAULTS, **(hyperparams or ZOO)}
    hidden = tuple(hp.get("policy_kwargs", {}).get("net_arch", (64, 64)))  # SB3's default net_arch: 64-64

    torch.set_num_threads(1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)

    envs = gym.vector.SyncVectorEnv([lambda: gym.make(ENV_ID)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs.single_action_space.seed(seed)
    eval_envs = gym.make_vec(ENV_ID, num_envs=episodes, vectorization_mode="vector_entry_point")
    obs_shape = envs.single_observation_space.shape
    n_actions = int(envs.single_action_space.n)
    q_network = QNetwork(int(np.prod(obs_shape)), n_actions, hidden)
    optimizer = optim.Adam(q_network.parameters(), lr=hp["learning_rate"])
    target_network = QNetwork(int(np.prod(obs_shape)), n_actions, hidden)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(hp["buffer_size"], obs_shape)
    q_params, target_params = list(q_network.parameters()), list(target_network.parameters())

    start = time.perf_counter()
    global_step = 0
    next_eval, eval_seed = eval_every, seed + 10_000
    solved_frames = solved_s = last_eval = None
    epsilon = hp["exploration_initial_eps"]
    obs, _ = envs.reset(seed=seed)

    while global_step < budget:
        # evaluate after the update that used the frames so far (SB3: in _on_rollout_start, after train())
        if global_step >= next_eval:
            while next_eval <= global_step:
                next_eval += eval_every
            last_eval = evaluate(q_network, eval_envs, eval_seed)
            eval_seed = None
            if last_eval >= threshold:
                solved_frames, solved_s = global_step, time.perf_counter() - start
                break

        for _ in range(hp["train_freq"]):
            # ALGO LOGIC: random actions before learning_starts, epsilon-greedy after (SB3's _sample_action)
            if global_step < hp["learning_starts"] or random.random() < epsilon:
                actions = np.array([envs.single_action_space.sample()])
            else:
                with torch.no_grad():
                    actions = q_network(torch.as_tensor(obs)).argmax(dim=1).numpy()

            next_obs, rewards, terminations, truncations, infos = envs.step(actions)
            global_step += 1

            # save data to the replay buffer; handle `final_obs` (same-step autoreset)
            real_next_obs = next_obs[0]
            if terminations[0] or truncations[0]:
                real_next_obs = infos["final_obs"][0]
            rb.add(obs[0], real_next_obs, actions[0], rewards[0], terminations[0])

            # CRUCIAL step easy to overlook
            obs = next_obs

            # SB3's _on_step: the hard target copy every target_update_interval env steps, then epsilon
            if global_step % hp["target_update_interval"] == 0:
                with torch.no_grad():
                    for target_param, param in zip(target_params, q_params):
                        target_param.mul_(1.0 - hp["tau"]).add_(param, alpha=hp["tau"])
            epsilon = linear_schedule(
                hp["exploration_initial_eps"],
                hp["exploration_final_eps"],
                hp["exploration_fraction"] * budget,
                global_step,
            )

        # ALGO LOGIC: training, SB3's train(): gradient_steps updates after each collection
        if global_step > hp["learning_starts"]:
            for _ in range(hp["gradient_steps"]):
                b_obs, b_actions, b_next_obs, b_rewards, b_dones = rb.sample(hp["batch_size"])
                with torch.no_grad():
                    target_max, _ = target_network(b_next_obs).max(dim=1)
                    td_target = b_rewards + hp["gamma"] * target_max * (1 - b_dones)
                old_val = q_network(b_obs).gather(1, b_actions).squeeze(1)
                loss = F.smooth_l1_loss(old_val, td_target)

                # optimize the model
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(q_network.parameters(), hp["max_grad_norm"])
                optimizer.step()

    elapsed = time.perf_counter() - start
    envs.close()
    eval_envs.close()
    return {
        "solved": solved_frames is not None,
        "frames": solved_frames or global_step,
        "train_s": solved_s if solved_s is not None else elapsed,
        "last_eval": last_eval,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=2048)
    parser.add_argument("--budget", type=int, default=50_000)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--threshold", type=float, default=475.0)
    args = parser.parse_args()
    print(json.dumps(run(args.seed, args.eval_every, args.budget, args.episodes, args.threshold)))
