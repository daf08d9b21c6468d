"""Grid search of the axis PID's gains, on tuning episodes disjoint from the evaluation episodes.

    cd examples && python -m dc_motor.tune_pid            # nominal axis, then randomised dynamics (~6 min)

Each (kp, ki, kd) is played on episodes with seeds 0-31 through rlpilot's own evaluation loop (what
``rlpilot eval --controller`` runs); the best mean return wins. Evaluation (docs/your-controller.md) uses
seeds 12345 on, never the tuning episodes. Prints one line per condition: the gains as
``--controller-kwargs`` / ``env.base_controller_kwargs``.
"""

from __future__ import annotations

import itertools

from rlpilot.play.episodes import evaluate_target

GRID = {"kp": [2.0, 4.0, 8.0, 16.0, 32.0, 64.0], "ki": [0.0, 2.0, 8.0, 32.0], "kd": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]}
CONDITIONS = {"nominal": "dc_motor.plant:ConveyorAxis", "randomised": "dc_motor.plant:RandomizedConveyorAxis"}


def score(env_id: str, gains: dict) -> float:
    result, _, _ = evaluate_target(
        env_id, episodes=32, seed=0, controller="dc_motor.pid:AxisPID", controller_kwargs=gains
    )
    return float(result.returns.mean())


def main() -> None:
    for condition, env_id in CONDITIONS.items():
        scores = {values: score(env_id, dict(zip(GRID, values))) for values in itertools.product(*GRID.values())}
        best = max(scores, key=scores.get)
        kwargs = ", ".join(f"{name}: {value:g}" for name, value in zip(GRID, best))
        print(f"{condition}: {{{kwargs}}}  mean return {scores[best]:.3f} on tuning seeds 0-31 ({len(scores)} points)")


if __name__ == "__main__":
    main()
