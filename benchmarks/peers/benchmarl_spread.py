"""BenchMARL's MAPPO/IPPO on PettingZoo MPE2 simple_spread, its own configuration: the peer of
benchmarks/multiagent_spread.py. Runs in BenchMARL's own virtualenv (BenchMARL 1.5.2 pins torchrl<0.12,
rlpilot pins 0.14.1): `make bench-marl-venv` builds .venv-benchmarl. Imports nothing of rlpilot.

Task as rlpilot's mappo-spread: N=3, local_ratio 0.5, max_cycles 25 (BenchMARL's yaml says 100), discrete
actions (BenchMARL prefers continuous where an env has both). Everything else is BenchMARL's yaml
defaults (lr 5e-5, 6000 frames a batch over 10 envs, 45 minibatches of 400, 256-256 MLPs, lambda 0.9,
no entropy bonus, shared parameters; 3M frames). Greedy evaluation (BenchMARL's deterministic
actions) every `--eval-every` frames, `--eval-episodes` episodes; the return is BenchMARL's: per
episode the summed reward, mean over agents. Prints one JSON line.
"""

import argparse
import json
import time

PROCESS_START = time.time()

# TorchRL 0.11 (BenchMARL's pin) imports MPE from pettingzoo.mpe, which pettingzoo 1.25+ moved to the mpe2
# package (pettingzoo.mpe now raises on import): point it at mpe2, the same env rlpilot trains on
import sys  # noqa: E402

import mpe2  # noqa: E402
import mpe2.all_modules  # noqa: E402

sys.modules["pettingzoo.mpe"] = mpe2
sys.modules["pettingzoo.mpe.all_modules"] = mpe2.all_modules

import torch  # noqa: E402
from benchmarl.algorithms import IppoConfig, MappoConfig  # noqa: E402
from benchmarl.environments import PettingZooTask  # noqa: E402
from benchmarl.experiment import Experiment, ExperimentConfig  # noqa: E402
from benchmarl.experiment.callback import Callback  # noqa: E402
from benchmarl.models.mlp import MlpConfig  # noqa: E402


class Record(Callback):
    def __init__(self):
        super().__init__()
        self.evals = []
        self.train_start = None

    def on_setup(self):
        self.train_start = time.time()

    def on_evaluation_end(self, rollouts):
        returns = []
        for td in rollouts:
            done = td.get(("next", "done")).view(-1).nonzero()
            end = int(done[0]) + 1 if len(done) else td.batch_size[0]
            returns.append(float(td.get(("next", "agent", "reward"))[:end].sum(0).mean()))
        self.evals.append(
            {
                "frames": self.experiment.total_frames,
                "return_mean": sum(returns) / len(returns),
                "episodes": len(returns),
                "elapsed_s": time.time() - self.train_start,
            }
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=["mappo", "ippo"], default="mappo")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--frames", type=int, default=3_000_000)
    parser.add_argument("--eval-every", type=int, default=600_000)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--out", required=True, help="BenchMARL's experiment folder")
    args = parser.parse_args()
    torch.set_num_threads(1)

    config = ExperimentConfig.get_from_yaml()
    config.max_n_frames = args.frames
    config.prefer_continuous_actions = False
    config.evaluation_interval = args.eval_every
    config.evaluation_episodes = args.eval_episodes
    config.render = False
    config.loggers = []
    config.create_json = True  # evaluation needs a logger or the json writer
    config.checkpoint_interval = 0
    config.save_folder = args.out
    task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
    task.config.update({"max_cycles": 25, "N": 3, "local_ratio": 0.5})
    algorithm = (MappoConfig if args.algo == "mappo" else IppoConfig).get_from_yaml()
    record = Record()
    experiment = Experiment(
        task=task,
        algorithm_config=algorithm,
        model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(),
        seed=args.seed,
        config=config,
        callbacks=[record],
    )
    experiment.run()
    print(
        json.dumps(
            {
                "peer": "benchmarl",
                "algo": args.algo,
                "seed": args.seed,
                "frames": experiment.total_frames,
                "evals": record.evals,
                "train_s": time.time() - record.train_start,
                "process_s": time.time() - PROCESS_START,
                "config": {
                    "lr": config.lr,
                    "frames_per_batch": config.on_policy_collected_frames_per_batch,
                    "n_envs": config.on_policy_n_envs_per_worker,
                    "minibatch_iters": config.on_policy_n_minibatch_iters,
                    "minibatch_size": config.on_policy_minibatch_size,
                    "gamma": config.gamma,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
