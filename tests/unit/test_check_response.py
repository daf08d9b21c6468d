"""``rlpilot check``'s action probe tells a dead time and a saturating controller from an action that never
reaches the env: the heated tank with its PID (a [0, 1] heater saturated at start-up, a dead time of 4 control
periods) is healthy and says both; a plant that ignores its action is still an error, with or without a
controller on top."""

from __future__ import annotations

import numpy as np
import pytest

from rlpilot.check.env import check_env
from rlpilot.check.pitfalls import Probe, response_findings
from rlpilot.config.sections import EnvConfig

TANK = "heated_tank.plant:HeatedTank"
PID = "heated_tank.pid:TankPID"


pytestmark = pytest.mark.usefixtures("examples_on_path")


def findings(env_cfg: EnvConfig) -> tuple:
    report = check_env(env_cfg, episodes=2, progress=None)
    return report, {finding.rule: finding for finding in report.findings}


@pytest.mark.parametrize("mode", ["add", "gains"])
def test_the_tank_with_its_pid_is_healthy_and_names_the_dead_time_and_the_saturation(mode):
    report, found = findings(EnvConfig(id=TANK, base_controller=PID, residual_mode=mode, backend="sync"))
    assert report.healthy and "actions_no_effect" not in found, report.render()
    dead_time = found["dead_time"]
    assert dead_time.severity == "info"
    assert dead_time.title == "the plant responds 4 steps after an action (a dead time)"
    assert dead_time.evidence["first_response_entries"] == [0, 1]  # the temperature; the heater entry is an echo
    assert dead_time.evidence["echo_entries"] == [3]
    saturates = found["controller_saturates"]
    assert saturates.severity == "warning" and "saturates the actuator on" in saturates.title
    assert saturates.evidence["first_unsaturated_step"] > 0  # the cold start: full power first
    assert "[info] the plant responds 4 steps after an action (a dead time)" in report.render()


def test_the_dead_time_read_is_the_plants():
    _, found = findings(EnvConfig(id=TANK, backend="sync", kwargs={"dead_time": 9}))
    assert found["dead_time"].title == "the plant responds 9 steps after an action (a dead time)"
    assert "controller_saturates" not in found  # no controller, no saturation finding
    _, found = findings(EnvConfig(id=TANK, backend="sync", kwargs={"dead_time": 0}))
    assert "dead_time" not in found and "actions_no_effect" not in found


@pytest.mark.parametrize(
    "env_id,controller",
    [
        ("tests.controller_fixture:DeadAxis", "none"),
        ("tests.controller_fixture:DeadAxis", "tests.controller_fixture:AxisPID"),
        ("tests.envs_for_tests:IgnoresActionEnv", "none"),
    ],
)
def test_an_env_that_ignores_its_action_is_still_an_error(env_id, controller):
    report, found = findings(EnvConfig(id=env_id, base_controller=controller, backend="sync"))
    assert not report.healthy
    assert found["actions_no_effect"].severity == "error" and "dead_time" not in found


def probe(observations, commands) -> Probe:
    return Probe(np.asarray(observations, np.float64), np.asarray(commands, np.float64))


def test_the_delay_counts_from_the_first_step_the_commands_differ():
    """Two probes by hand: the commands differ from step 2 (both saturated before), the plant's entry 0 from
    step 5, entry 1 echoes the command: a dead time of 3 steps."""
    steps = 8
    low_commands = [[1.0]] * 2 + [[0.5]] * (steps - 2)
    high_commands = [[1.0]] * steps
    plant_low = [0.0] * 5 + [1.0] * (steps - 5)
    low = probe([[p, c[0]] for p, c in zip(plant_low, low_commands)], low_commands)
    high = probe([[0.0, c[0]] for c in high_commands], high_commands)
    (finding,) = response_findings([low, high], [[0.0], [1.0]], box=True)
    assert finding.rule == "dead_time" and finding.title.startswith("the plant responds 3 steps")
    assert finding.evidence["echo_entries"] == [1]
    # only the echo moves: the plant did not respond within the probe
    flat = probe([[0.0, c[0]] for c in low_commands], low_commands)
    (finding,) = response_findings([flat, high], [[0.0], [1.0]], box=True)
    assert finding.rule == "actions_only_echoed" and finding.severity == "warning"
    # a response at the step the commands differ is no dead time
    at_once = probe([[c[0] * 2, c[0]] for c in low_commands], low_commands)
    assert response_findings([at_once, high], [[0.0], [1.0]], box=True) == []
