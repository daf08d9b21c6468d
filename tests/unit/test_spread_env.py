"""SpreadVector reproduces mpe2's simple_spread_v3; resets are uniform, maskable and seeded; the heuristic works."""

import numpy as np
import pytest
import torch

from rlpilot.multiagent.spread import SpreadVector, heuristic_action


def copy_world(vec: SpreadVector, world) -> None:
    """mpe2's world state -> SpreadVector(1)."""
    vec.set_state(
        np.stack([a.state.p_pos for a in world.agents])[None],
        np.stack([a.state.p_vel for a in world.agents])[None],
        np.stack([lm.state.p_pos for lm in world.landmarks])[None],
    )


@pytest.mark.parametrize("n", [2, 3, 4])
def test_parity_with_mpe2(n):
    """Observations, rewards and truncation equal mpe2's over 12 episodes (300 steps): random actions,
    the heuristic's (from mpe2's observations), and starts with two agents overlapping (collision
    force and penalty)."""
    simple_spread_v3 = pytest.importorskip("mpe2.simple_spread_v3")
    env = simple_spread_v3.parallel_env(N=n)
    world = env.unwrapped.world
    vec = SpreadVector(1, N=n)
    rng = np.random.default_rng(n)
    colliding_steps = 0
    for episode in range(12):
        obs, _ = env.reset(seed=100 * n + episode)
        if episode % 3 == 0:  # agent 1 starts inside agent 0
            world.agents[1].state.p_pos = world.agents[0].state.p_pos + rng.uniform(-0.1, 0.1, 2)
            obs = {a: env.unwrapped.observe(a) for a in env.agents}
        copy_world(vec, world)
        expected = np.stack([obs[a] for a in env.possible_agents])
        np.testing.assert_allclose(vec.observe()[0].numpy(), expected, atol=1e-5)
        for t in range(1, 26):
            if episode % 3 == 1:
                action = heuristic_action(torch.as_tensor(expected), n).numpy()
            else:
                action = rng.integers(0, 5, n)
            obs, rew, term, trunc, _ = env.step({a: int(action[i]) for i, a in enumerate(env.possible_agents)})
            o, r, terminated, truncated = vec.step(torch.as_tensor(action)[None])
            expected = np.stack([obs[a] for a in env.possible_agents])
            np.testing.assert_allclose(o[0].numpy(), expected, atol=1e-5, err_msg=f"episode {episode} step {t}")
            np.testing.assert_allclose(r[0].numpy(), [rew[a] for a in env.possible_agents], atol=1e-5)
            assert o.dtype == torch.float32 and r.dtype == torch.float32
            assert bool(truncated[0]) == all(trunc.values()) == (t == 25)
            assert not terminated[0] and not any(term.values())
            colliding_steps += int(vec.coverage()["collisions"][0] > 0)
        assert not env.agents  # mpe2 ended the episode where SpreadVector truncated
    assert colliding_steps >= 4, colliding_steps  # at least the first step of each overlapping start


def ks_uniform(x: torch.Tensor) -> float:
    """One-sample Kolmogorov-Smirnov statistic of x against U(-1, 1)."""
    x = x.flatten().sort().values.double()
    n = x.numel()
    cdf = (x + 1.0) / 2.0
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return max((i / n - cdf).max().item(), (cdf - (i - 1) / n).max().item())


def test_reset_distribution():
    env = SpreadVector(2000)
    obs = env.reset(seed=0)
    assert obs.shape == (2000, 3, env.obs_dim) and obs.dtype == torch.float32 and env.obs_dim == 18
    critical = 1.95 / np.sqrt(2000 * 3)  # alpha = 0.001
    for name, x in [("pos", env.pos), ("landmarks", env.landmarks)]:
        assert x.dtype == torch.float64 and x.shape == (2000, 3, 2)
        for dim in range(2):
            assert ks_uniform(x[..., dim]) < critical, f"{name}[..., {dim}]"
    assert abs(np.corrcoef(env.pos[..., 0].flatten(), env.pos[..., 1].flatten())[0, 1]) < 0.05
    assert (env.vel == 0).all() and (env.t == 0).all()
    torch.testing.assert_close(obs[..., 2:4], env.pos.float())


def test_masked_reset_and_seeding():
    env = SpreadVector(64)
    env.reset(seed=3)
    for _ in range(5):
        env.step(torch.randint(0, 5, (64, 3)))
    before = {k: getattr(env, k).clone() for k in ("pos", "vel", "landmarks", "t")}
    mask = torch.zeros(64, dtype=torch.bool)
    mask[::3] = True
    obs = env.reset(mask=mask)
    for k, old in before.items():
        new = getattr(env, k)
        assert torch.equal(new[~mask], old[~mask]), k
        assert not torch.equal(new[mask], old[mask]), k
    assert (env.vel[mask] == 0).all() and (env.t[mask] == 0).all() and (env.t[~mask] == 5).all()
    torch.testing.assert_close(obs, env.observe())

    a, b = SpreadVector(8), SpreadVector(8)
    assert torch.equal(a.reset(seed=11), b.reset(seed=11))
    actions = torch.randint(0, 5, (10, 8, 3))
    for act in actions:
        assert all(torch.equal(x, y) for x, y in zip(a.step(act), b.step(act)))
    assert torch.equal(a.reset(mask=torch.ones(8, dtype=torch.bool)), b.reset(mask=torch.ones(8, dtype=torch.bool)))
    assert not torch.equal(a.reset(seed=12), b.reset(seed=11))


def test_truncation_and_render():
    env = SpreadVector(4, max_cycles=3)
    env.reset(seed=0)
    flags = [env.step(torch.zeros(4, 3, dtype=torch.long))[3] for _ in range(4)]
    assert [bool(f.all()) for f in flags] == [False, False, True, True] and not any(f.any() for f in flags[:2])
    image = env.render(1, size=64)
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8
    assert ((image == (70, 70, 170)).all(-1)).sum() > 20  # agents drawn
    assert ((image == (50, 50, 50)).all(-1)).sum() > 3  # landmarks drawn


def episode_returns(policy, episodes: int, seed: int) -> torch.Tensor:
    """Per-agent return of each episode, averaged over agents: [episodes]."""
    env = SpreadVector(episodes)
    obs = env.reset(seed=seed)
    total = torch.zeros(episodes, env.n_agents, dtype=torch.float64)
    for _ in range(env.max_cycles):
        obs, reward, _, truncated = env.step(policy(obs))
        total += reward
    assert truncated.all()
    return total.mean(-1)


def test_heuristic_beats_random():
    """Measured on 1000 episodes (two seeds): heuristic -6.7 to -6.8 per agent, uniform random -26.3 to -26.7."""
    generator = torch.Generator().manual_seed(0)
    heuristic = episode_returns(lambda obs: heuristic_action(obs, 3), 200, seed=1).mean().item()
    random = episode_returns(lambda obs: torch.randint(0, 5, obs.shape[:-1], generator=generator), 200, seed=1)
    random = random.mean().item()
    assert heuristic > -8.5 and random < -22.0 and heuristic - random > 14.0, (heuristic, random)
