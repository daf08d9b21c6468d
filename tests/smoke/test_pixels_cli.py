"""Pixel envs at the CLI: `rlpilot check` reports the pixel specs and writes a sample frame PNG;
`export` refuses image observations in one line."""

import importlib.util

import pytest
from PIL import Image

from cli_runner import run_cli

if importlib.util.find_spec("minatar") is None:  # looked up, not imported here (it imports seaborn, scipy, pandas)
    pytest.skip("the pixels extra: pip install 'rlpilot[pixels]'", allow_module_level=True)


rlpilot = run_cli


def test_check_on_a_pixel_env_reports_the_chain_and_writes_a_png(tmp_path):
    out = rlpilot("check", "MinAtar/Breakout-v1", "--episodes", "4", "--set", "env.frame_stack=2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "network in   (8, 10, 10) torch.float32 in [0, 1] (C x H x W) after ToTensorImage -> CatFrames(N=2)" in text
    assert "Observation scale under the random policy (per channel)" in text
    assert "[info] image observations" in text and "unnormalised" not in text
    png = tmp_path / "check-MinAtar-Breakout-v1.png"
    assert f"Sample frame (raw | each stacked frame the network sees): {png.name}" in text
    image = Image.open(png)
    assert image.height == 96 and image.width == 3 * 96 + 2 * 4  # raw frame and two stacked frames, 4 px gaps
    pixels = image.convert("RGB").getcolors(10_000)
    assert len(pixels) >= 3  # background, gaps and objects: not a blank image


def test_missing_pixels_extra_is_one_line_naming_it(monkeypatch):
    from rlpilot.common.errors import UserError
    from rlpilot.registry import NAMESPACES, resolve_env

    monkeypatch.setitem(NAMESPACES, "NoSuchGames", ("no_such_games_package", None, "pixels"))
    with pytest.raises(
        UserError, match=r"^'NoSuchGames/Pong-v0' needs the pixels extra: pip install 'rlpilot\[pixels\]'$"
    ):
        resolve_env("NoSuchGames/Pong-v0")


def test_export_refuses_image_observations_in_one_line(tmp_path):
    from rlpilot.config import load_config
    from rlpilot.loop.trainer import train

    sets = ["train.total_frames=1024", "train.eval_every_frames=1024", "train.eval_episodes=2", "train.loggers=[]"]
    run = train(load_config("ppo-minatar-breakout", overrides=sets), run_dir=str(tmp_path / "run"), show_progress=False)
    out = rlpilot("export", str(run.path), "--format", "onnx", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "rlpilot: error: export does not support image observations yet: the artifact would need the pixel chain "
        "(ToTensorImage, GrayScale, Resize, CatFrames) outside the network; use `rlpilot eval RUN` instead"
    ]
