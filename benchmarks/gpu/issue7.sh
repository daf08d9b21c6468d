# Issue 7 on a GPU machine: native envs and the collection path on CUDA, and PPO runs on CUDA.
# Run from the repo root after `source benchmarks/gpu/setup.sh`; writes to ${OUT:-/tmp/out}.
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/unit/test_native_envs.py -k "cuda or transitions or partial" 2>&1 | tail -3
timeout 150 python3 benchmarks/throughput.py --device cuda --envs CartPole-v1,Pendulum-v1 --skip-gym-backend \
  --sizes 64,1024,4096,16384,65536,262144 --seconds 1 --out "$out/throughput_cuda.txt" 2>&1 | grep -v Warning
for spec in "ppo-cartpole-gpu" "ppo-cartpole-gpu --set env.num_envs=4096 --set ppo.minibatch_size=16384" "ppo-cartpole --set env.backend=native"; do
  echo "== rlpilot train $spec --set train.device=cuda"
  timeout 120 python3 -m rlpilot.cli train $spec --set train.device=cuda --set train.max_seconds=60 --set train.loggers=[] --runs "$out/runs" -q 2>&1 | grep -E "status|frames|doctor"
done
