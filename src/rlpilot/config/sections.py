"""The run configuration's sections, one dataclass each (``env``, ``model``, ``ppo``, ``dqn``, ``sac``, ``td3``,
``marl``, ``train``, ``collect``, ``guard``, ``llm``, ``grpo``), one docstring per field (``docs/config.md`` is
generated from them) and each field's valid values declared with it (:mod:`rlpilot.config.fields`); an
algorithm's horizons as methods of its section. :class:`rlpilot.config.schema.Config` holds them all. Imports no
torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlpilot.config.fields import (
    at_least,
    between,
    checked,
    fraction,
    int_items,
    one_of,
    positive,
    positive_items,
)

BACKENDS = ("auto", "numpy", "sync", "native", "async", "pettingzoo", "vmas")
MAX_SEED = 2**31 - 1  # numpy's legacy seeding takes < 2**32; evaluation seeds add offsets to the run's seed
LOGGERS = ("tensorboard", "csv", "wandb", "mlflow")
MAX_EPISODE_STEPS = 1_000_000
"""The longest time limit an env may be given (``env.max_episode_steps``, in a config or an exported policy's
signature): far past any task's episode (CartPole's is 500, the arm's 200), yet an evaluation of it ends."""


@dataclass
class EnvConfig:
    id: str = "CartPole-v1"
    """gymnasium id (``CartPole-v1``), a user's class (``package.module:Class``) or an id registered
    by a module (``package.module:Env-v0`` imports ``package.module`` first)."""
    num_envs: int = positive(8)
    """Environments stepped together as one batch during training. More envs: more frames per
    policy call (faster collection) but fewer updates per frame."""
    backend: str = one_of("auto", *BACKENDS)
    """``auto``: gymnasium's numpy-vectorised env where one exists (CartPole), else a gymnasium
    ``SyncVectorEnv``; ``numpy`` or ``sync`` force one. ``native``: rlpilot's batched torch
    implementation (CartPole, Acrobot, Pendulum, MountainCar, MountainCarContinuous; same dynamics,
    tested against gymnasium), stepped as tensors on ``train.device``: fastest, and the way to run
    envs on a GPU. ``async``: gymnasium's ``AsyncVectorEnv``, one process per env (worth it when a
    step is slow, e.g. CarRacing's ~1 ms, and there are cores to spare)."""
    normalize_obs: bool = False
    """Standardise observations with TorchRL's ``ObservationNorm`` (loc/scale measured once from
    random-policy rollouts, then fixed and saved with the run). Off for CartPole, whose scales are
    already close to 1."""
    obs_norm_frames: int = positive(4096)
    """Random-policy frames used to measure the normalisation statistics."""
    action_encoding: str = one_of("categorical", "categorical", "one_hot")
    """Discrete actions as a categorical index (``categorical``), or as a one-hot vector
    (``one_hot``, TorchRL ``GymEnv``'s default; PPO then samples from ``OneHotCategorical``)."""
    reward_scale: float = at_least(1.0, 0.0)
    """Training rewards are multiplied by this (TorchRL's ``RewardScaling``); episode returns are
    reported unscaled. Keeps value targets near unit scale (Pendulum: rewards down to -16 a step)."""
    max_episode_steps: int | None = positive(None, at_most=MAX_EPISODE_STEPS)
    """Override of the env's time limit (episodes are truncated there); ``None`` keeps gymnasium's. At most
    a million steps (:data:`MAX_EPISODE_STEPS`), so that every episode ends."""
    kwargs: dict = field(default_factory=dict)
    """Keyword arguments passed to the environment's constructor."""
    frame_stack: int = positive(1)
    """Image observations: frames stacked along channels (TorchRL's ``CatFrames``), so a CNN sees
    motion; after a reset the first frame fills the stack. 1: no stacking. Ignored for vector observations."""
    frame_size: int | None = positive(None)
    """Image observations: resize frames to this many pixels square (TorchRL's ``Resize``);
    ``None`` keeps the env's size."""
    grayscale: bool = False
    """Image observations: RGB frames to one gray channel (TorchRL's ``GrayScale``)."""
    base_controller: str = checked("none", controller=("none", "pd", "pid", "pd-ff", "adaptive-pd"))
    """Residual RL: a controller runs inside the env and the policy corrects it (``residual_mode``): ``pd`` /
    ``pid`` (the arm envs' inverse kinematics + PD with velocity feed-forward, + an anti-windup integral;
    ``rlpilot.envs.arm.controllers``), ``pd-ff`` (the tracking arm's PD plus acceleration feed-forward, a third
    gain ``ka``), ``adaptive-pd`` (the tracking arm's PD retuned every step from an online identification of the
    arm; ``rlpilot.envs.arm.adaptive``) or your own, ``package.module:Class``, a
    ``torch.nn.Module`` following ``rlpilot.controllers.Controller`` (docs/your-controller.md). The policy's
    last layer starts at zero, so training starts at the controller's score; ``rlpilot export`` writes
    controller + policy as one artifact. ``none``: off."""
    base_controller_kwargs: dict = checked(factory=dict, finite_items=True)
    """Keyword arguments the base controller is built with (``{kp: 2.0, ki: 0.5}``): a user's controller's
    constructor arguments, or the arm controllers' gains (``kp``, ``kd``, ``ki``, ``ka``; ``adaptive-pd``: its
    schedule's and estimator's constants, ``rlpilot.envs.arm.adaptive.ADAPTIVE_GAINS``)."""
    condition: dict = checked(factory=dict, finite_items=True)
    """Play every episode under this condition of the plant (``{load: 3.0, delay: 1}``): values for the uncertain
    parameters the env declares (``condition_ranges``; docs/conditions.md), passed at every reset; the ones not
    named are drawn or nominal as the env does. Empty: the env as it is. ``rlpilot eval --condition`` sets it."""
    condition_sampled: bool = False
    """Draw every declared parameter ``condition`` does not fix from its declared range at each reset, from the
    episode's seed (``--condition sampled``): the same plants on the same episodes for every policy compared."""
    residual_scale: float = positive(0.2)
    """Residual RL: action units the policy can add to the base controller's output per unit of its action,
    whose space is the env's action box centred at zero (``[-1, 1]`` stays ``[-1, 1]``; a heater's ``[0, 1]``
    becomes ``[-0.5, 0.5]``, so at most ``0.5 * residual_scale`` either way); with ``residual_mode=gains``,
    decades the policy can move each gain (1.0: kp and kd from 1/10 to 10 times the tuned ones)."""
    residual_mode: str = one_of("add", "add", "gains")
    """Residual RL: ``add``: the policy's action, in the action box centred at zero, is added to the base
    controller's output (then clipped to the box); ``gains``: the policy
    schedules the base controller's ``gain_names`` (the arm's kp and kd), each times
    ``10 ** (residual_scale * action)`` (one action per gain; the env always receives the controller's law).
    Action 0 is the base controller exactly, in both, whatever the action box (``[0, 1]`` included)."""
    residual_penalty: float = at_least(0.0, 0.0)
    """Residual RL: subtracted from the reward each step, times the squared policy action summed over its
    dimensions (``residual_penalty * |a|^2``, the action before any ``residual_gate``): straying from the base
    controller costs, meant to keep the policy at the base where changing it gains nothing (on the arm it did
    not keep the PD's precision: docs/robot-arm.md; ``residual_gate`` did). 0: off. It is in every env built
    from the config (training, its evaluations, ``rlpilot eval``'s returns); tracking metrics are unchanged."""
    residual_gate: float = at_least(0.0, 0.0)
    """Residual RL: the policy's action acts only where an error signal (observation entry
    ``residual_gate_index``, or your controller's ``gate_signal``; on the arm, the error monitor
    ``env.kwargs.obs_error_peak``, the last float) reads
    above this in absolute value, fully at twice that: below it the base controller runs exactly as tuned (a
    supervisory envelope; exported with the controller). In the signal's units (the arm: metres). 0: off."""
    residual_gate_index: int | None = None
    """Residual RL: which observation entry ``residual_gate`` reads (0-based; negative counts from the end), the
    error signal of your plant. ``None``: your controller's ``gate_signal(observation)`` if it defines one (a
    signal computed from the observation, exported with it; docs/your-controller.md), else the arm's error
    monitor (the last entry, with ``env.kwargs.obs_error_peak``)."""
    gain_average: int = between(0, 0, 1_000_000)
    """Residual RL with ``residual_mode=gains``: the controller runs on the average of the policy's gains (in
    decades) over the episode so far, earlier steps fading with this time constant in steps
    (:class:`rlpilot.envs.residual.AveragedGains`; ``gain_weights``: weighted by the policy). A schedule that
    estimates one plant from a noisy history (``rlpilot train adapt``'s student) acts on its estimates fused over
    the episode instead of retuning on every wiggle. Exported with the controller (its state). 0: off."""
    gain_excitation: int = between(0, 0, 100_000)
    """With ``gain_average``: each step's estimate weighs in the average as much as the plant was driven lately, the
    mean change of the command over about this many steps, over the most it has been this episode (1 at the first
    step). A settled plant tells little about itself: an estimate made then counts for little, and the gains learnt
    from the last transient hold (adaptive control's freezing without persistent excitation). 0: every step
    alike."""
    gain_weights: bool = False
    """With ``gain_average``: the policy gives each gain a weight too (two action columns per gain: the gains,
    then their weights ``10 ** (residual_scale * action)``), the average weighted by them. ``false``: every step
    weighs 1, one column per gain."""
    frame_skip: int = positive(1)
    """Repeat each action this many env frames, summing rewards (gymnasium's ``MaxAndSkipObservation``,
    which also max-pools the last two frames against flicker). Budgets count agent steps, not env frames."""
    history: int = between(0, 0, 64)
    """Append the last this many steps of ``[the env's observation then, the action the plant received then]``
    to every observation, newest first, zeros at an episode's start (``rlpilot.envs.history``): a policy that
    must tell plants apart (a gain, a dead time) sees how the plant answered. Any env with a flat Box observation
    and Box actions; under ``base_controller`` the action recorded is the controller's law as the plant got it.
    ``rlpilot export`` carries the history as the artifact's state, so the artifact takes the env's observation
    alone. 0: off."""

    def gate_problem(self) -> str | None:
        """What is wrong with ``residual_gate`` here (one line), or None. Checked when a config is read and
        again where an env is built (:func:`rlpilot.envs.make_vector_env` takes an env section on its own)."""
        if self.residual_gate and self.residual_gate_index is None and not self.kwargs.get("obs_error_peak"):
            if ":" in self.base_controller:  # a user's controller may compute the signal (gate_signal): checked
                return None  # where it is built (rlpilot.envs.make.residual_vector_env)
            return (
                "env.residual_gate reads an error signal in the observation: name its entry with "
                "env.residual_gate_index=I, or on rlpilot/ReacherTrack-v0 it reads the error monitor, the "
                "observation's last float: set env.kwargs.obs_error_peak (e.g. 0.9); or env.residual_gate=0"
            )
        return None


@dataclass
class ModelConfig:
    hidden_sizes: list = positive_items(factory=lambda: [64, 64])
    """Units per hidden layer, for actor and critic alike (separate networks)."""
    activation: str = one_of("tanh", "tanh", "relu")
    """``tanh`` (the PPO default in CleanRL, SB3 and the Zoo) or ``relu``."""
    encoder: str = one_of("auto", "auto", "mlp", "cnn")
    """``auto``: a CNN for image observations (``[H, W, C]`` per env), else none; ``cnn`` or ``mlp`` force
    one. The CNN feeds ``hidden_sizes`` (the MLP head) with its flattened features."""
    cnn_layers: list = field(default_factory=list)
    """CNN conv layers as ``[out_channels, kernel, stride]`` triples (ReLU after each). Empty: derived
    from the frame size: Nature-DQN's ``[[32, 8, 4], [64, 4, 2], [64, 3, 1]]`` for frames of 36 px and
    more, MinAtar's ``[[16, 3, 1]]`` for smaller ones."""
    init: str = one_of("orthogonal", "orthogonal", "lecun")
    """Initial weights of every linear layer: ``orthogonal`` (gain sqrt(2) on hidden layers and a small last layer,
    as CleanRL and SB3's on-policy algorithms) or ``lecun`` (truncated normal of variance 1/fan-in, zero biases,
    every layer alike: Flax's default, so SBX's networks)."""
    actor_inputs: list = int_items(factory=list)
    """PPO: the observation entries the actor reads (0-based, negative from the end), the critic reading them
    all: an asymmetric actor-critic (Pinto et al. 2018). A privileged teacher reads only the true dynamics
    parameters (``rlpilot/ReacherTrack-v0``'s ``obs_privileged``) and so acts the same way all episode; a
    deployable actor reads only what is measured while its critic also reads what the simulator knows. Empty:
    every entry (the usual)."""
    fallback_margin: float = at_least(0.0, 0.0)
    """PPO, continuous actions: a safe fallback off the training distribution. The actor carries the range of the
    (normalised) observations it was trained on (set by ``rlpilot train adapt`` from its DAgger data, docs/adapt.md);
    where any entry lies beyond that range by more than this many of its standard deviations, the actor's mean is 0:
    under ``env.residual_mode=gains`` the base controller as built (the robust gains). Plain torch operations:
    part of the exported artifact. 0: off (an actor without the statistics)."""


@dataclass
class PPOConfig:
    steps_per_env: int = positive(32)
    """Steps collected per env before each update; frames per batch = this x ``env.num_envs``."""
    epochs: int = between(10, 1, 1000)
    """Passes over each batch. High values squeeze more learning out of each frame (at most 1,000: past
    a few dozen the policy leaves the clip region and stops learning from the batch)."""
    minibatch_size: int = positive(256)
    """Transitions per gradient step, drawn without replacement within each epoch."""
    lr: float = positive(3e-4)
    """Adam learning rate at the start of training."""
    lr_schedule: str = one_of("linear", "linear", "cosine", "constant")
    """``linear`` decays to 0 over the real number of updates of the budget; ``cosine`` follows
    torch's ``CosineAnnealingLR`` with T_max = ``lr_schedule_fraction`` of the updates (periodic: past
    T_max the LR rises again); ``constant`` does not change."""
    lr_schedule_fraction: float = positive(1.0)
    """Share of the budget's updates over which the linear schedule reaches 0 (then stays there), or
    the cosine schedule's T_max."""
    minibatch_replacement: bool = False
    """Draw minibatch indices with replacement (some transitions twice, some never in an epoch)
    instead of a permutation of the batch."""
    gamma: float = fraction(0.99)
    """Discount per step."""
    gae_lambda: float = fraction(0.95)
    """GAE lambda: 0 is one-step TD (low variance, biased), 1 is Monte Carlo."""
    clip_epsilon: float = positive(0.2)
    """PPO ratio clip at the start of training."""
    clip_schedule: str = one_of("constant", "linear", "constant")
    """``linear`` anneals the clip to 0 over the budget (RL Zoo's CartPole setting), or ``constant``."""
    entropy_coef: float = at_least(0.0, 0.0)
    """Weight of the entropy bonus. 0 suits CartPole; continuous tasks often want ~1e-3."""
    value_coef: float = at_least(0.5, 0.0)
    """Weight of the value loss."""
    max_grad_norm: float = positive(0.5)
    """Gradient clipping by global norm."""
    normalize_advantage: bool = True
    """Standardise advantages per minibatch."""
    value_loss: str = one_of("l2", "l2", "smooth_l1")
    """``l2`` or ``smooth_l1`` (TorchRL's default; l2 matches SB3 and CleanRL)."""
    distribution: str = one_of("auto", "auto", "categorical", "one_hot_categorical")
    """Discrete actions: ``auto`` matches the action spec (Categorical for an index, OneHotCategorical
    for one-hot); ``categorical`` / ``one_hot_categorical`` force one (a mismatch is the classic silent
    bug: kept selectable so ``doctor`` can be shown to catch it)."""
    init_log_std: float = 0.0
    """Continuous actions: initial log standard deviation of the Gaussian before squashing."""
    anchor_coef: float = at_least(0.0, 0.0)
    """Continuous actions: weight of a behaviour-cloning anchor, ``anchor_coef x mean |mu(s) - mu_0(s)|^2`` over the
    minibatch, with ``mu`` the actor's mean before squashing and ``mu_0`` the actor as it was at the run's first PPO
    update (a trust region to a policy RL refines: ``train adapt``'s distilled student, or a resumed run, whose
    ``--set ppo.anchor_coef`` may change). 0: no anchor."""

    # -- horizons, derived from the batch (never stored) ----------------------------------------
    def minibatches_per_epoch(self, frames_per_batch: int) -> int:
        return max(1, frames_per_batch // self.minibatch_size)

    def num_updates(self, frames_per_batch: int, num_batches: int) -> int:
        """Gradient steps over the whole budget: the horizon of LR and clip schedules."""
        return num_batches * self.epochs * self.minibatches_per_epoch(frames_per_batch)


@dataclass
class MultiAgentConfig:
    share_parameters: bool = True
    """One actor and one critic for all agents of the group (each agent's batch through the same
    weights), or one of each per agent (``false``: agents can specialise, N times the parameters)."""
    agent_id: bool = True
    """With shared parameters: append a one-hot agent index to each agent's observation, so one network
    can still act differently per agent. Ignored without sharing (each network knows its agent)."""


@dataclass
class TrainConfig:
    total_frames: int = positive(200_000)
    """Budget: environment frames (transitions) to collect before stopping."""
    eval_every_frames: int = positive(5_000)
    """Frames between greedy evaluations (evaluation time counts in wall time)."""
    eval_episodes: int = positive(20)
    """Greedy episodes per evaluation, run as one vectorised batch (one episode per env)."""
    eval_same_episodes: bool = False
    """Every evaluation plays the same episodes (the same seeds: on a randomised plant the same plants, with
    ``env.condition_sampled`` the same conditions), so the curve and the best checkpoint follow the policy, not
    which plants an evaluation happened to draw. Off: evaluation ``k`` plays fresh seeds."""
    solved_at: float | None = None
    """Greedy evaluation mean return at or above which the run is solved and stops; ``None``: the
    env's registered ``reward_threshold`` if any, else run the whole budget."""
    stop_when_solved: bool = True
    """Stop when the run is solved (``solved_consecutive`` evaluations in a row at or above the threshold)."""
    evals_after_solved: int = at_least(0, 0)
    """With ``stop_when_solved``: evaluations to run on after the run is solved before stopping, to see
    whether the greedy policy holds while training continues; ``meta.json`` records the share of them at
    or above the threshold as ``stays_solved`` (benchmarks/stays_solved.py). 0: stop at the solve."""
    eval_at_start: bool = False
    """Evaluate once before the first update, so the curve starts at what training has to improve
    (the GRPO presets: the model after its supervised warm-up)."""
    seed: int = between(0, 0, MAX_SEED)
    """Seeds torch, the training envs (seed, seed+1, ...) and the evaluation envs (seed + 10000 ...)."""
    device: str = one_of("auto", "auto", "cpu", "cuda")
    """``auto`` (cuda when available), ``cpu`` or ``cuda``: policy, data and losses all live there."""
    num_threads: int = positive(1)
    """torch intra-op threads. Small MLPs are fastest on one thread (thread sync costs more than it saves)."""
    flush_denormal: bool = True
    """Subnormal floats (below ~1.2e-38) read and written as zero while training (x86's FTZ/DAZ, what XLA does on
    CPU). Adam's moment estimates of weights whose gradient is zero (dead ReLU units) decay through the subnormal
    range, where the CPU computes ~15x slower: a fused Adam step over 68k such entries took 1.5 ms instead of 0.09.
    Numbers change only below 1.2e-38; ``false`` keeps IEEE subnormals."""
    compile: str = one_of("auto", "auto", "on", "off")
    """The update (loss, backward, gradient clip and Adam step) as one program compiled by inductor: ``auto`` on
    CUDA, and on a CPU when the run plans enough updates for the compile to pay back with a margin (PPO 10,000, DQN
    16,000, SAC 3,000, TD3 5,000; a compiled update took 0.35-0.8x the eager one's time: docs/speed.md, "Compiled
    updates and the physical limit"), after 256 eager updates (a run that stops sooner never compiles); ``on`` from
    the first update wherever asked (MAPPO/IPPO too), ``off`` never. Compiled code is cached per user
    (``~/.cache/rlpilot/inductor``); the first build's seconds are logged as ``compile/<program>_s``; a loss that
    cannot be compiled is one line on stderr and trains eagerly. Control algorithms (PPO, MAPPO/IPPO, DQN, SAC,
    TD3)."""
    cuda_graphs: bool = True
    """On CUDA: each compiled update program (loss, backward, clip, guard test and Adam step) and the policy's acting
    forward replayed as one CUDA graph, captured at their second call (one launch instead of dozens; PyTorch's
    graph-safe random numbers give the same draws). Measured on an H200: docs/speed.md, "CUDA graphs". ``false``:
    launch kernel by kernel. No effect on a CPU."""
    log_every_frames: int = positive(2_048)
    """Frames between rows of ``metrics.csv``."""
    max_seconds: float | None = positive(None)
    """Wall-clock budget in seconds (evaluation included): the run stops (status ``finished``) at the
    first batch boundary past it. ``None``: frames alone bound the run."""
    solved_consecutive: int = positive(1)
    """Evaluations in a row at or above the threshold that make the run solved."""
    milestone_return: float | None = None
    """Training-episode return whose first crossing is recorded as a milestone event (``None``: none)."""
    milestone_every_frames: int = positive(20_000)
    """Frames between status lines (frames, fps, episodes, mean/best training return, last eval) with ``-v``."""
    checkpoint_every_frames: int = positive(20_000)
    """Frames between ``checkpoints/last.pt`` writes (also written at the end and on SIGINT/SIGTERM);
    a killed run resumes from the last one, losing at most this many frames."""
    checkpoint_buffer: bool = True
    """Replay-based algorithms: include the replay buffer in checkpoints (CartPole: ~66 bytes a
    transition), so a resumed run does not restart from an empty buffer."""
    loggers: list = field(default_factory=lambda: ["tensorboard"])
    """TorchRL loggers fed alongside ``metrics.csv``: any of ``tensorboard`` (``RUN/tb``), ``csv``,
    ``wandb``, ``mlflow`` (the last two when installed)."""


@dataclass
class CollectConfig:
    workers: int = positive(1)
    """Collection actors on Ray (docs/distributed.md): 1 collects in the training process, unless ``--ray`` is
    given (then one actor); N > 1 needs ``--ray local`` or ``--ray ADDRESS`` and splits ``env.num_envs`` over N actors
    (``env.num_envs / N`` envs each, seeds as in one process), so a batch holds the same frames as in one
    process. PPO collects synchronously (every actor steps with the same weights, the learner waits for the
    whole batch); DQN, SAC and TD3 asynchronously (each actor starts its next batch with the latest weights
    as soon as its last one arrives; the learner keeps its ``updates_per_frame``). Worth it when the env,
    not the learner, bounds the run (a step of milliseconds); not for envs that step in microseconds."""


@dataclass
class GuardConfig:
    enabled: bool = True
    """Skip updates whose loss or gradient norm is non-finite or above ``max_loss``."""
    max_loss: float = positive(1e6)
    """A loss above this is treated like a non-finite one (an exploding update)."""
    lr_cut: float = fraction(0.5)
    """Each skipped update multiplies the learning rate by this."""
    max_trips: int = positive(10)
    """Skipped updates since the last checkpoint that trigger a rollback to it."""
    on_nonfinite_obs: str = one_of("reset", "reset", "stop")
    """A NaN/inf observation from the env: ``reset`` that env (the transition is dropped from
    bootstrapping) and record an event, or ``stop`` the run with the reason in ``meta.json``."""


@dataclass
class DQNConfig:
    steps_per_env: int = positive(32)
    """Steps collected per env between learning phases; frames per batch = this x ``env.num_envs``."""
    buffer_size: int = positive(100_000)
    """Replay capacity in transitions. CartPole transitions are ~66 bytes: 100k is ~7 MB."""
    batch_size: int = positive(64)
    """Transitions per gradient step."""
    lr: float = positive(1e-3)
    """Adam learning rate (constant)."""
    gamma: float = fraction(0.99)
    """Discount per step."""
    updates_per_frame: float = between(0.5, 1e-6, 64.0)
    """Gradient steps per collected frame (update-to-data ratio); RL Zoo's CartPole setting is 128 per 256.
    At most 64 (high-UTD methods use up to ~20)."""
    learning_starts: int = at_least(1_000, 0)
    """Frames collected with uniformly random actions before the first update, so early updates do not
    overfit a handful of transitions."""
    eps_init: float = fraction(1.0)
    """Epsilon-greedy: exploration probability at the start."""
    eps_end: float = fraction(0.05)
    """Exploration probability after annealing."""
    exploration_fraction: float = fraction(0.1)
    """Share of ``train.total_frames`` over which epsilon anneals linearly (the horizon is derived)."""
    target_update: str = one_of("hard", "hard", "soft")
    """``hard``: copy the online network every ``target_update_interval`` updates; ``soft``: Polyak
    averaging with ``tau`` after every update."""
    target_update_interval: int = positive(10)
    """Updates between hard target copies."""
    tau: float = fraction(0.005)
    """Soft target update rate."""
    double_dqn: bool = True
    """Select the next action with the online network, value it with the target network (less
    overestimation than max over the target)."""
    loss: str = one_of("huber", "huber", "l2")
    """``huber`` (smooth L1: robust to large TD errors, SB3's default) or ``l2``."""
    max_grad_norm: float = positive(10.0)
    """Gradient clipping by global norm."""
    n_step: int = positive(1)
    """n-step returns (within a collected batch, never across episode ends)."""
    prioritized: bool = False
    """Prioritised replay: sample transitions with probability proportional to (|TD error| + eps)^alpha."""
    alpha: float = at_least(0.6, 0.0)
    """Prioritisation strength (0 is uniform)."""
    beta_init: float = fraction(0.4)
    """Importance-weight exponent at the start, annealed linearly to 1 over the budget."""
    priority_eps: float = positive(1e-6)
    """Added to |TD error| so no transition gets zero probability."""

    # -- horizons, derived from the batch and the budget (never stored) ---------------------------
    def updates_per_batch(self, frames_per_batch: int) -> int:
        return max(1, round(frames_per_batch * self.updates_per_frame))

    def exploration_frames(self, total_frames: int) -> int:
        """Frames over which epsilon anneals."""
        return max(1, int(total_frames * self.exploration_fraction))


@dataclass
class OffPolicyConfig:
    """What SAC and TD3 share: collection between learning phases, the replay, the warm-up, targets."""

    steps_per_env: int = positive(8)
    """Steps collected per env between learning phases; frames per batch = this x ``env.num_envs``.
    Small: SB3 updates after every env step; a few steps per phase keep the data nearly as fresh at a
    fraction of the per-batch overhead."""
    buffer_size: int = positive(1_000_000)
    """Replay capacity in transitions (SB3's default: on short budgets nothing is ever evicted)."""
    batch_size: int = positive(256)
    """Transitions per gradient step (SB3's and the SAC and TD3 papers' 256)."""
    lr: float = positive(3e-4)
    """Adam learning rate of every network (and SAC's temperature), constant."""
    gamma: float = fraction(0.99)
    """Discount per step."""
    tau: float = fraction(0.005)
    """Polyak rate of the targets: target += tau x (online - target) (SAC: after every update; TD3: on each
    delayed actor update)."""
    learning_starts: int = at_least(100, 0)
    """Frames collected with uniformly random actions (in the Box) before the first update (SB3: 100)."""
    warmup_hold: int = positive(1)
    """Env steps each uniform warm-up action is held for (1: a fresh action every step, as SB3). Held actions
    explore further where a task needs one push kept up: on MountainCarContinuous, uniform forces held for 20-50
    steps reach the flag in 28 of 30 episodes, fresh ones every step in none."""
    updates_per_frame: float = between(1.0, 1e-6, 64.0)
    """Critic gradient steps per collected frame (update-to-data ratio; SB3's train_freq=1, gradient_steps=1); at
    most 64 (high-UTD methods use up to ~20)."""
    max_grad_norm: float | None = positive(None)
    """Clip of the global gradient norm over all the algorithm's networks together; ``None``: no clipping
    (as SB3 and the papers); the norm is still logged as ``opt/grad_norm``."""


@dataclass
class SACConfig(OffPolicyConfig):
    lr: float = positive(3e-4)
    """Adam learning rate of actor, critics and temperature (constant; SB3's default, the SAC paper's)."""
    alpha_init: float = positive(1.0)
    """Initial entropy temperature (SB3's and TorchRL's 1.0); learned from there."""
    target_entropy: str | float = "auto"
    """Entropy the temperature steers the policy towards, in nats: ``auto`` is -dim(A) (the SAC
    paper's heuristic), or a number. Measured on the action in the env's Box (TorchRL's TanhNormal
    convention), so a Box of half-width 2 reads log 2 nats higher per dim than SB3's [-1, 1] scale."""


@dataclass
class TD3Config(OffPolicyConfig):
    lr: float = positive(1e-3)
    """Adam learning rate of actor and critics (constant; SB3's and the TD3 paper's 1e-3)."""
    policy_delay: int = positive(2)
    """Critic updates per actor and target update (the TD3 paper's 2)."""
    target_noise: float = at_least(0.2, 0.0)
    """Target policy smoothing: std of the Gaussian added to the target actor's action, as a fraction
    of the Box's half-width (the paper's 0.2 on [-1, 1])."""
    target_noise_clip: float = at_least(0.5, 0.0)
    """Clip of that noise, as a fraction of the Box's half-width (the paper's 0.5)."""
    exploration_noise: float = at_least(0.1, 0.0)
    """Std of the Gaussian added to the actor's action while collecting, as a fraction of the Box's
    half-width (the paper's and RL Zoo's 0.1); the sum is clipped into the Box."""
    delay_targets: bool = False
    """``false``: the target actor and critics move (Polyak, ``tau``) after every critic update (SBX's TD3);
    ``true``: only on actor updates, every ``policy_delay``-th (the paper, SB3, TorchRL). At the RL Zoo's Pendulum
    settings the targets kept moving solve in fewer updates: 13k frames against 15k-16k on tuning seeds 0-3
    (docs/sac-td3.md)."""
    actor_q: str = one_of("q1", "q1", "min")
    """What the actor ascends: the first critic ``Q_1(s, mu(s))`` (the paper, SB3) or the smaller of the twins
    (``min``, SBX's TD3)."""


@dataclass
class LLMConfig:
    model: str = "tiny"
    """``tiny``: a 2-layer Qwen2 and a character tokenizer built in code (no download), trained from
    scratch by the SFT warm-up; otherwise a local Hugging Face model directory (``save_pretrained``
    output: config.json, weights, tokenizer files). Nothing is fetched from the hub."""
    task: str = "arithmetic"
    """Prompt set and reward (``rlpilot.llm.tasks``): ``arithmetic`` (exact sum of two digits) or
    ``length`` (N lowercase letters)."""
    tiny_hidden_size: int = positive(64)
    """Width of the tiny model (``llm.model=tiny``)."""
    tiny_layers: int = positive(2)
    """Transformer layers of the tiny model."""
    dtype: str = one_of("float32", "float32", "bfloat16")
    """Weights, optimiser state and activations: ``float32`` or ``bfloat16``. bfloat16 halves memory, but Adam
    on bfloat16 weights drops updates smaller than ~1/256 of a weight: at a pretrained model's usual
    learning rate (~1e-6) nothing changes. Keep float32 to train unless memory forces otherwise."""
    max_new_tokens: int = positive(4)
    """Tokens generated per response at most; a response without end-of-sequence by then is unfinished
    (rewarded 0 by the tasks here)."""
    temperature: float = positive(1.0)
    """Sampling temperature of the training groups (evaluation is greedy)."""
    sft_steps: int = at_least(60, 0)
    """Supervised warm-up steps before RL (0: none). Short on purpose: it teaches the answer format,
    RL has to find the right answers."""
    sft_lr: float = positive(0.003)
    """Adam learning rate of the warm-up."""
    sft_batch_size: int = positive(32)
    """Prompt + answer examples per warm-up step."""


@dataclass
class GRPOConfig:
    prompts_per_step: int = positive(16)
    """Training prompts sampled per step; frames per batch = this x ``group_size`` (one frame = one response)."""
    group_size: int = at_least(8, 2)
    """Responses sampled per prompt. GRPO's advantage is a response's reward standardised within its
    group, so a group where every response scores the same teaches nothing."""
    lr: float = positive(0.001)
    """Adam learning rate of the policy (constant)."""
    epochs: int = between(2, 1, 1000)
    """Gradient steps on each sampled batch (the clip keeps later ones near the sampling policy); at most 1,000."""
    clip_epsilon: float = positive(0.2)
    """Clip of the per-token importance ratio, as in PPO."""
    kl_coef: float = at_least(0.02, 0.0)
    """Weight of the KL penalty to the frozen reference model (the model after SFT, or as loaded)."""
    entropy_coef: float = at_least(0.0, 0.0)
    """Weight of the token-entropy bonus (0: none)."""
    max_grad_norm: float = positive(1.0)
    """Gradient clipping by global norm."""
    eval_prompts: int = at_least(0, 0)
    """Held-out prompts per evaluation; 0 takes all of the task's held-out prompts."""
