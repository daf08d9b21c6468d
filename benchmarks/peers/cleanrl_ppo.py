"""PPO on CartPole-v1 in CleanRL's single-file style (cleanrl/ppo.py), with RL Zoo's CartPole settings:
a speed peer of benchmarks/time_to_solve.py (worker ``cleanrl-ppo-zoo``). Imports nothing of rlpilot.

CleanRL's code (layer_init, Agent, the GAE loop, minibatch epochs, one Adam over both networks, global
gradient-norm clipping), with the algorithm of the SB3 PPO that the Zoo's settings were tuned for where
CleanRL's defaults differ:

- the Zoo's hyperparameters (``ZOO``; time_to_solve.py passes its own ``SB3_PPO_ZOO``), learning rate and
  clip range linear to 0 on SB3's clock (progress = frames collected / budget, after each collection);
- no value clipping (CleanRL's ``clip_vloss`` default is on; SB3's ``clip_range_vf`` is None) and the
  value loss weighted as SB3's, ``vf_coef * MSE`` (CleanRL's is ``vf_coef * 0.5 * MSE``);
- a truncated episode bootstraps with the value of its final observation (SB3 adds gamma * V(final obs)
  to the last reward; CleanRL treats truncation as termination); no entropy bonus (the Zoo's 0.0);
- SB3's stopping rule: collect while frames < budget (CleanRL: budget // batch iterations).

Envs: ``gymnasium.vector.SyncVectorEnv`` of real CartPole-v1 envs, as CleanRL, autoresetting in the same
step (SB3's semantics: the final observation comes in ``infos``). gymnasium's numpy-vectorised CartPole
(``make_vec(..., vectorization_mode="vector_entry_point")``) steps 8 envs in 40 us against 72 us here, but
only resets in the NEXT step (a dummy transition per episode in the batch); the difference is ~3% of an
iteration (the 20 minibatch updates dominate). The evaluation uses that vectorised env: each of its envs
plays one episode, so its reset rule does not matter there, and it steps 20 envs 4x faster.

    python benchmarks/peers/cleanrl_ppo.py --seed 100   # prints the result dict
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
import torch.optim as optim
from torch.distributions.categorical import Categorical

ENV_ID = "CartPole-v1"
# RL Baselines3 Zoo, hyperparams/ppo.yml, CartPole-v1, in SB3's names: must match SB3_PPO_ZOO in
# benchmarks/zoo.py (the benchmark passes its own dict; this copy is for a standalone run)
ZOO = dict(
    n_steps=32,
    batch_size=256,
    gae_lambda=0.8,
    gamma=0.98,
    n_epochs=20,
    ent_coef=0.0,
    learning_rate=1e-3,
    clip_range=0.2,
    n_envs=8,
    schedule="linear",
)
# SB3's PPO defaults for what the Zoo leaves unset: separate 64-64 tanh actor and critic (MlpPolicy)
SB3_DEFAULTS = dict(vf_coef=0.5, max_grad_norm=0.5, net_arch=(64, 64), normalize_advantage=True)


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp(sizes: list[int], out_std: float) -> nn.Sequential:
    layers = []
    for n_in, n_out in zip(sizes[:-2], sizes[1:-1]):
        layers += [layer_init(nn.Linear(n_in, n_out)), nn.Tanh()]
    return nn.Sequential(*layers, layer_init(nn.Linear(sizes[-2], sizes[-1]), std=out_std))


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, hidden=(64, 64)):
        super().__init__()
        self.critic = mlp([obs_dim, *hidden, 1], out_std=1.0)
        self.actor = mlp([obs_dim, *hidden, n_actions], out_std=0.01)

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x), validate_args=False)  # no argument checks: they cost per step
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def evaluate(actor: nn.Module, envs, seed: int | None) -> float:
    """Greedy mean return of one episode per env (benchmarks/time_to_solve.py's rule: as SB3's
    evaluate_policy with as many envs as episodes; the env is seeded at its first reset only)."""
    obs, _ = envs.reset(seed=seed)
    returns = np.zeros(envs.num_envs)
    done = np.zeros(envs.num_envs, dtype=bool)
    while not done.all():
        with torch.no_grad():
            action = actor(torch.as_tensor(obs)).argmax(dim=1).numpy()
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
    num_envs, num_steps = hp["n_envs"], hp["n_steps"]
    batch_size = num_envs * num_steps
    linear = hp.get("schedule", "constant") == "linear"

    torch.set_num_threads(1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)

    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make(ENV_ID) for _ in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    eval_envs = gym.make_vec(ENV_ID, num_envs=episodes, vectorization_mode="vector_entry_point")
    obs_shape = envs.single_observation_space.shape
    agent = Agent(int(np.prod(obs_shape)), int(envs.single_action_space.n), tuple(hp["net_arch"]))
    optimizer = optim.Adam(agent.parameters(), lr=hp["learning_rate"], eps=1e-5)

    # ALGO Logic: Storage setup
    obs = torch.zeros((num_steps, num_envs) + obs_shape)
    actions = torch.zeros((num_steps, num_envs), dtype=torch.long)
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))

    start = time.perf_counter()
    global_step = 0
    next_eval, eval_seed = eval_every, seed + 10_000
    solved_frames = solved_s = last_eval = None
    next_obs = torch.as_tensor(envs.reset(seed=seed)[0])
    next_done = torch.zeros(num_envs)

    while global_step < budget:
        # evaluate after the update that used the frames so far (SB3: in _on_rollout_start, after train())
        if global_step >= next_eval:
            while next_eval <= global_step:
                next_eval += eval_every
            last_eval = evaluate(agent.actor, eval_envs, eval_seed)
            eval_seed = None
            if last_eval >= threshold:
                solved_frames, solved_s = global_step, time.perf_counter() - start
                break

        for step in range(num_steps):
            global_step += num_envs
            obs[step] = next_obs
            dones[step] = next_done

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs_np, reward, terminations, truncations, infos = envs.step(action.numpy())
            timeouts = truncations & ~terminations
            if timeouts.any():  # SB3: bootstrap a truncated episode with the value of its final observation
                final = torch.as_tensor(np.stack([infos["final_obs"][i] for i in np.flatnonzero(timeouts)]))
                with torch.no_grad():
                    reward = reward.astype(np.float32)
                    reward[timeouts] += hp["gamma"] * agent.get_value(final).flatten().numpy()
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.as_tensor(next_obs_np)
            next_done = torch.as_tensor(terminations | truncations, dtype=torch.float32)

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(num_steps)):
                if t == num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + hp["gamma"] * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + hp["gamma"] * hp["gae_lambda"] * nextnonterminal * lastgaelam
            returns = advantages + values

        # Annealing on SB3's clock: progress remaining after this collection (the Zoo's lin_1e-3, lin_0.2)
        frac = max(0.0, 1.0 - global_step / budget) if linear else 1.0
        optimizer.param_groups[0]["lr"] = frac * hp["learning_rate"]
        clip_coef = frac * hp["clip_range"]

        # flatten the batch
        b_obs = obs.reshape((-1,) + obs_shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)

        # Optimizing the policy and value network
        b_inds = np.arange(batch_size)
        for _epoch in range(hp["n_epochs"]):
            np.random.shuffle(b_inds)
            for begin in range(0, batch_size, hp["batch_size"]):
                mb_inds = b_inds[begin : begin + hp["batch_size"]]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                mb_advantages = b_advantages[mb_inds]
                if hp["normalize_advantage"] and len(mb_inds) > 1:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss: SB3's, unclipped, vf_coef * MSE
                v_loss = ((newvalue.view(-1) - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - hp["ent_coef"] * entropy_loss + v_loss * hp["vf_coef"]

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), hp["max_grad_norm"])
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
    parser.add_argument("--budget", type=int, default=100_000)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--threshold", type=float, default=475.0)
    args = parser.parse_args()
    print(json.dumps(run(args.seed, args.eval_every, args.budget, args.episodes, args.threshold)))
