# rlpilot: every target bootstraps .venv idempotently (seconds when it already exists).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rlpilot-installed
DEMO_RUN := runs/demo-$(shell date +%Y%m%d-%H%M%S)

.PHONY: demo test test-all lint docs bench venv clean bench-marl-venv bench-sbx-venv

venv: $(STAMP)

# torch is pinned and installed first, explicitly: pip must never pick a torch build on its own.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

# The demo stops after two greedy evaluations in a row at >= 475 (the preset stops at the first, the
# rule of benchmarks/time_to_solve.py), so the 100-episode evaluation that follows sees a settled policy.
demo: $(STAMP)
	$(BIN)/rlpilot train ppo-cartpole --set train.solved_consecutive=2 --run-dir $(DEMO_RUN)
	$(BIN)/rlpilot eval $(DEMO_RUN) --episodes 100
	@echo "run directory: $(DEMO_RUN)   curve: $(DEMO_RUN)/curve.png"

# two test processes (pytest-xdist), one per core of the 2-core CI machine; tests that start a local Ray
# cluster share an xdist group, so only one runs at a time
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup tests

# everything, including learning runs marked slow
test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "" tests

# the docs site (mkdocs.yml: docs/ plus the API reference from the docstrings) into site/, warnings as errors
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet
	@echo "docs site: site/index.html"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools examples
	$(BIN)/ruff format --check src tests benchmarks tools examples

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[dev,bench]"
	$(BIN)/python benchmarks/time_to_solve.py

clean:
	rm -rf $(VENV) runs site

# BenchMARL, the multi-agent peer of benchmarks/multiagent_spread.py, pins torchrl<0.12 (rlpilot: 0.14.1):
# its own virtualenv, on torch 2.13 (this machine's local CPU wheel when present), never rlpilot's .venv
bench-marl-venv:
	test -x .venv-benchmarl/bin/python || $(PYTHON) -m venv .venv-benchmarl
	.venv-benchmarl/bin/python -m pip install -q $$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null || echo torch==2.13.0)
	.venv-benchmarl/bin/python -m pip install -q "torch==$$(.venv-benchmarl/bin/python -c 'import torch; print(torch.__version__)')" \
		benchmarl==1.5.2 pettingzoo==1.27.0 mpe2==1.1.1

# SBX (Stable-Baselines3 in JAX), a speed peer of benchmarks/time_to_solve.py (--sbx-python, default this
# venv): JAX on the CPU in its own virtualenv, never rlpilot's .venv; torch 2.13 for SB3's buffers (this
# machine's local CPU wheel when present). JAX's parts and tfp-nightly (SBX's distributions) pinned to the
# versions the benchmark ran with; gymnasium and numpy as in .venv.
bench-sbx-venv:
	test -x .venv-sbx/bin/python || $(PYTHON) -m venv .venv-sbx
	.venv-sbx/bin/python -m pip install -q $$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null || echo torch==2.13.0)
	.venv-sbx/bin/python -m pip install -q "torch==$$(.venv-sbx/bin/python -c 'import torch; print(torch.__version__)')" \
		stable-baselines3==2.9.2 sbx-rl==0.28.0 "jax[cpu]==0.10.2" jaxlib==0.10.2 flax==0.12.8 optax==0.2.8 \
		tfp-nightly==0.26.0.dev20261027 "gymnasium[mujoco]==1.4.0" mujoco==4.0.1 numpy==2.4.6
