# Issue 38 on the GPU machine: CUDA graphs for the compiled update and the policy step, tested (tests/unit/
# test_cuda_graphs.py) and timed: the learning phase's cost per gradient step against SBX (JAX on the GPU) and SB3 on
# the GPU, with rlpilot also without graphs and eagerly (benchmarks/peer_update_cost.py --device cuda), and the policy
# step (benchmarks/gpu/policy_step.py). Run from the repo root after `source benchmarks/gpu/setup.sh`.
out=${OUT:-/tmp/out}; mkdir -p "$out"
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache  # the tests' compiled programs are the benchmark's (same settings)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== tests"; date
timeout 200 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/unit/test_cuda_graphs.py 2>&1 \
  | tee "$out/tests.log" | grep -v -i warn | tail -25
echo "== policy step"; date
[ -n "$SKIP_POLICY_STEP" ] || timeout 60 python3 benchmarks/gpu/policy_step.py --calls 2000 2>&1 | grep -v -i warn | tee "$out/policy_step.txt"
echo "== peer_update_cost --device cuda"; date
timeout 220 python3 benchmarks/peer_update_cost.py --device cuda --algos dqn,sac,td3 --phases 40 --rounds 1 \
  --libraries "${LIBRARIES:-rlpilot,rlpilot-nographs,rlpilot-eager,sbx}" --out "$out/peer_update_cost-h200.txt" 2>&1 \
  | grep -v -i warn | tail -12
date
