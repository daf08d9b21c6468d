# Source this on the GPU machine (Python 3.12, torch preinstalled, nothing fetchable):
# installs the carried wheels (.whl/, made by benchmarks/gpu/wheels.sh here) into /tmp/site.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 RL_LOGGING_LEVEL=WARNING
python3 -c "import torch, torchrl, tensordict, gymnasium; print('torch', torch.__version__, 'torchrl', torchrl.__version__, 'tensordict', tensordict.__version__, 'gymnasium', gymnasium.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '')"
