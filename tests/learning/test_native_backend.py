"""The native backend is a faster road to the same place: a policy trained on it does as well on
gymnasium's own env as a policy trained on gymnasium."""

import pytest

from rlpilot.config import load_config
from rlpilot.loop.trainer import train
from rlpilot.play.episodes import evaluate_target


@pytest.mark.slow
@pytest.mark.parametrize(("preset", "threshold"), [("ppo-cartpole", 475.0), ("ppo-pendulum", -250.0)])
def test_trained_on_native_evaluated_on_gymnasium(preset, threshold, tmp_path):
    results = {}
    for backend in ("native", "auto"):
        config = load_config(
            preset, overrides=["train.seed=0", f"env.backend={backend}", f"train.solved_at={threshold}"]
        )
        run = train(config, run_root=str(tmp_path / backend), show_progress=False)
        assert run.best_eval >= threshold, (backend, run.meta())
        # the best checkpoint, judged on 500 episodes of each implementation (other seeds than training's;
        # the two draw different initial states, and Pendulum's return depends on them: many episodes)
        on_gym, _, _ = evaluate_target(run.path, episodes=500, seed=777, checkpoint="best", backend="auto")
        on_native, _, _ = evaluate_target(run.path, episodes=500, seed=777, checkpoint="best", backend="native")
        results[backend] = (on_gym.mean, on_native.mean)
    for backend, (on_gym, on_native) in results.items():
        assert on_gym >= threshold - 0.05 * abs(threshold), (backend, results)
        # the same policy scores alike on both implementations of the env
        assert on_native == pytest.approx(on_gym, abs=0.1 * abs(threshold)), (backend, results)
