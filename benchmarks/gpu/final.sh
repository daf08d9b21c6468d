# The GPU checks of issues 8 and 10, one prepared run (source benchmarks/gpu/setup.sh first).
# LLM: a Qwen2-0.5B-shaped model (random weights, no download possible) through rlpilot's GRPO step.
# CarRacing: ppo-carracing on CUDA with 16 forked env workers for a 4-minute wall budget.
out=${OUT:-/tmp/out}; mkdir -p "$out"
echo "== llm_gpu (bf16)"; date
timeout 170 python3 benchmarks/llm_gpu.py --out "$out/llm" 2>&1 | grep -v -i warn | tail -25
echo "== carracing_gpu"; date
timeout 290 python3 benchmarks/carracing_gpu.py --seconds 230 --num-envs 16 2>&1 | grep -v -i warn | tail -15
for f in "$out"/carracing_gpu/*/metrics.csv "$out"/carracing_gpu/metrics.csv; do [ -f "$f" ] && cp "$f" "$out/carracing_metrics.csv"; done
for f in "$out"/carracing_gpu/*/curve.png "$out"/carracing_gpu/curve.png; do [ -f "$f" ] && cp "$f" "$out/carracing_curve.png"; done
date
