"""The guard's update step: the library's clip and fused-Adam kernels without their Python bookkeeping, proven
equal to ``clip_grad_norm_`` and ``Adam.step`` bit for bit."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("max_norm", [0.05, float("inf")])
def test_the_guards_clip_and_adam_step_are_the_librarys_bit_for_bit(max_norm):
    """``guard.clip_grad_norm`` and ``guard.adam_step`` (the library's kernels called without its Python
    bookkeeping) against ``clip_grad_norm_`` and ``Adam.step`` on twin networks: identical norms, parameters and
    optimiser state over several steps, and a checkpoint of one optimiser loads into the other."""
    from rlpilot.guard import adam_step, clip_grad_norm

    torch.manual_seed(0)
    nets = [torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    optimizers = [torch.optim.Adam(net.parameters(), lr=3e-3, eps=1e-5, fused=True) for net in nets]
    for step in range(5):
        x = torch.randn(32, 5, generator=torch.Generator().manual_seed(step))
        for net in nets:
            net.zero_grad(set_to_none=True)
            net(x).pow(2).mean().backward()
        ours = clip_grad_norm(list(nets[0].parameters()), max_norm)
        theirs = torch.nn.utils.clip_grad_norm_(list(nets[1].parameters()), max_norm, foreach=True)
        assert torch.equal(ours, theirs)
        adam_step(optimizers[0])
        optimizers[1].step()
        for a, b in zip(nets[0].parameters(), nets[1].parameters(), strict=True):
            assert torch.equal(a, b)
    ours_state, theirs_state = optimizers[0].state_dict(), optimizers[1].state_dict()
    assert ours_state["param_groups"] == theirs_state["param_groups"]
    for index, state in theirs_state["state"].items():
        for key, value in state.items():
            assert torch.equal(ours_state["state"][index][key], value), key
    optimizers[1].load_state_dict(ours_state)


def test_training_flushes_subnormals_and_restores_the_mode_after():
    """``train.flush_denormal`` (default on): inside the run a subnormal Adam moment is read as zero (the ~15x slow
    path never runs); outside it IEEE subnormals are back (tests and notebooks share the process)."""
    from rlpilot.config import load_config
    from rlpilot.guard import adam_step
    from rlpilot.loop.trainer import denormals_flushed, flushing_denormals

    assert load_config("dqn-cartpole").train.flush_denormal is True
    assert not flushing_denormals()

    def moment_after_a_step() -> float:
        p = torch.nn.Parameter(torch.ones(4))
        p.grad = torch.zeros(4)
        optimizer = torch.optim.Adam([p], fused=True)
        optimizer.step()
        optimizer.state[p]["exp_avg_sq"].fill_(1e-39)  # subnormal in float32
        p.grad = torch.zeros(4)
        adam_step(optimizer)
        return float(optimizer.state[p]["exp_avg_sq"][0])

    with denormals_flushed(True):
        assert flushing_denormals()
        assert moment_after_a_step() == 0.0
    assert not flushing_denormals()
    assert 0.0 < moment_after_a_step() < 1.2e-38


def test_an_adam_with_a_group_of_mixed_dtypes_steps_once_through_the_library():
    """A group the direct path cannot take (two dtypes) sends the whole step to ``Adam.step``: no group is stepped
    twice (the fused kernel first, then the library)."""
    from rlpilot.guard import adam_step

    torch.manual_seed(0)
    make = lambda: [torch.nn.Parameter(torch.randn(3)), torch.nn.Parameter(torch.randn(3, dtype=torch.float64))]  # noqa: E731
    ours, theirs = make(), make()
    for a, b in zip(ours, theirs):
        b.data.copy_(a.data)
    first, second = [torch.nn.Parameter(torch.randn(4)) for _ in range(2)]
    second.data.copy_(first.data)
    opt_ours = torch.optim.Adam([{"params": [first]}, {"params": ours}], lr=0.1, fused=True)
    opt_theirs = torch.optim.Adam([{"params": [second]}, {"params": theirs}], lr=0.1, fused=True)
    for p in [first, second, *ours, *theirs]:
        p.grad = torch.ones_like(p)
    adam_step(opt_ours)
    opt_theirs.step()
    assert torch.equal(first, second)
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
