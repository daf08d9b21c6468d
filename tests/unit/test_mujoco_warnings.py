"""MuJoCo's warnings reach Python, not a MUJOCO_LOG.TXT in the user's working directory."""

import subprocess
import sys

import pytest

pytest.importorskip("mujoco")


def test_a_mujoco_env_whose_model_warns_writes_nothing_where_the_user_stands(tmp_path):
    """HalfCheetah-v5's model makes MuJoCo 4 warn at every build (a deprecated attribute): without rlpilot's
    handler MuJoCo appends it to MUJOCO_LOG.TXT in the working directory; through rlpilot's env builder it is a
    Python warning and the folder stays empty."""
    build = "from rlpilot.config import load_config; from rlpilot.envs import make_env; "
    build += "make_env(load_config('sac-halfcheetah').env, seed=0).close()"
    plain = "import gymnasium; gymnasium.make('HalfCheetah-v5').close()"
    for script, writes in ((plain, True), (build, False)):
        folder = tmp_path / ("plain" if writes else "rlpilot")
        folder.mkdir()
        out = subprocess.run([sys.executable, "-W", "always", "-c", script], cwd=folder, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        assert (folder / "MUJOCO_LOG.TXT").exists() == writes, list(folder.iterdir())
        if not writes:
            assert "settotalmass" not in out.stderr  # a deprecation in gymnasium's model: not the user's to fix


def test_a_mujoco_warning_that_is_not_a_deprecation_is_a_runtime_warning():
    import mujoco

    from rlpilot.envs.make import mujoco_warnings_to_python

    mujoco_warnings_to_python("gymnasium.envs.mujoco.half_cheetah_v5:HalfCheetahEnv")
    handler = mujoco.get_mju_user_warning()
    with pytest.warns(RuntimeWarning, match="MuJoCo: Nan, Inf or huge value in QACC"):
        handler("Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable.")
