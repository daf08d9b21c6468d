#!/usr/bin/env bash
# Here (with network to PyPI): download the wheels the GPU machine lacks into .whl/ (git-ignored via
# .git/info/exclude), for Python 3.12 manylinux x86-64. The GPU machine has torch, transformers, tokenizers, and JAX,
# Flax and Optax (SBX's, for benchmarks/peer_update_cost.py --device cuda).
set -euo pipefail
mkdir -p .whl
for pkg in torchrl==0.14.1 tensordict==0.14.3 gymnasium==1.4.0 farama-notifications==0.0.6 box2d==2.3.10 \
           pygame==2.6.1 pyvers==0.2.3 \
           sbx-rl==0.28.0 stable-baselines3==2.9.2 tfp-nightly==0.26.0.dev20261027 dm-tree==0.1.10 gast==0.7.0 decorator==5.3.1 \
           hoptorch==0.1.4 orjson==3.13.0 importlib_metadata==10.2.0 lazy-importer==0.1.0; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$pkg"
done
ls .whl
