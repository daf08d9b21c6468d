"""Networks sized from specs: never from env names, never with a hand-written action count."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torchrl.data import Bounded, Categorical, OneHot, TensorSpec

from rlpilot.common.errors import UserError
from rlpilot.config.sections import ModelConfig
from rlpilot.control.compiled.cuda_graph import graphed

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


ACTING_OPS = {nn.Tanh: torch.tanh, nn.ReLU: torch.relu}
"""The activations :func:`acting_forward` calls directly."""


def acting_forward(net: nn.Module, cuda_graph: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """``net``'s forward for collecting (no autograd, a few observations a call). An :func:`mlp` (an ``nn.Sequential``
    of ``Linear`` layers and :data:`ACTING_OPS` activations) runs as the same operations called directly, without
    each layer's module call: 35 -> 17 us for a 256-256 Q-network on one observation on this project's 2-core
    machine (2026-12-04), paid every env step at the RL Zoo's one env. On a CPU it reads detached views of the
    layers' parameters, taken once: what it returns never needs autograd (so a caller needs no grad-mode context, whose
    entry and exit cost ~15 us a frame at one env), and the views share the parameters' memory, so weights loaded
    into them in place (``load_state_dict``, the compiled updates' writes) are used; a parameter replaced by a new
    tensor is not (nothing in rlpilot does that; build the forward again). Hooks on the layers are not run (nothing in
    rlpilot sets any). Any other network: its own forward. Keep the result on the learner (not on a module: a deep
    copy of the module would share it). ``cuda_graph`` (``train.cuda_graphs``), for a network on CUDA: the forward
    replayed as one CUDA graph per observation shape (:class:`rlpilot.control.compiled.cuda_graph.CudaGraph`;
    captured again when a parameter is replaced), the layers read at each call."""
    if not isinstance(net, nn.Sequential) or not all(isinstance(m, (nn.Linear, *ACTING_OPS)) for m in net):
        return net
    first = next(net.parameters(), None)
    if first is not None and first.device.type == "cpu":
        views = [
            (m.weight.detach(), m.bias.detach() if m.bias is not None else None, None)
            if isinstance(m, nn.Linear)
            else (None, None, ACTING_OPS[type(m)])
            for m in net
        ]

        def detached(x: torch.Tensor) -> torch.Tensor:
            for weight, bias, op in views:
                x = nn.functional.linear(x, weight, bias) if op is None else op(x)
            return x

        detached.grad_free = True  # type: ignore[attr-defined]
        return detached
    plan = [(m, None) if isinstance(m, nn.Linear) else (None, ACTING_OPS[type(m)]) for m in net]

    def forward(x: torch.Tensor) -> torch.Tensor:
        for linear, op in plan:
            x = nn.functional.linear(x, linear.weight, linear.bias) if op is None else op(x)
        return x

    return graphed(forward, net, cuda_graph, "acting forward")


def mlp(in_features: int, out_features: int, cfg: ModelConfig, *, out_gain: float = 1.0) -> nn.Sequential:
    """MLP with orthogonal init (sqrt(2) on hidden layers, ``out_gain`` on the last), as CleanRL/SB3."""
    layers: list[nn.Module] = []
    width = in_features
    for hidden in cfg.hidden_sizes:
        layers += [nn.Linear(width, int(hidden)), ACTIVATIONS[cfg.activation]()]
        width = int(hidden)
    layers.append(nn.Linear(width, out_features))
    for layer in layers:
        if isinstance(layer, nn.Linear):
            if cfg.init == "lecun":
                lecun_normal_(layer.weight)
            else:
                nn.init.orthogonal_(layer.weight, out_gain if layer is layers[-1] else 2**0.5)
            nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


TRUNCATED_STD = 0.87962566103423978
"""Std of a standard normal truncated to [-2, 2]: Flax's ``variance_scaling`` divides by it so the truncated
draw keeps the variance asked for."""


def lecun_normal_(weight: torch.Tensor) -> None:
    """Flax's default kernel init, ``lecun_normal``: truncated normal (at 2 std) of variance 1/fan-in."""
    std = (1.0 / weight.shape[1]) ** 0.5 / TRUNCATED_STD
    nn.init.trunc_normal_(weight, std=std, a=-2 * std, b=2 * std)


RESIDUAL_OUT_GAIN = 0.0
"""Residual RL (``env.base_controller``): the actor's last layer starts at exactly zero, so the greedy
correction is 0 and a new run plays the base controller's actions."""


def actor_out_gain(config) -> float:
    """Scale of a continuous actor's last layer at initialisation: 0.01 (CleanRL/SB3), or 0 for residual RL."""
    return RESIDUAL_OUT_GAIN if config.env.base_controller != "none" else 0.01


def observation_size(observation_spec) -> int:
    spec = observation_spec["observation"]
    if len(spec.shape) != 2:
        raise UserError(
            f"observation of shape {tuple(spec.shape[1:])}: an MLP needs a flat vector; image observations "
            "([C, H, W] after the pixel chain) need model.encoder=cnn (or auto)"
        )
    return int(spec.shape[-1])


NATURE_CNN = [[32, 8, 4], [64, 4, 2], [64, 3, 1]]  # Mnih et al. 2015, CleanRL's PPO Atari, SB3's NatureCNN
MINATAR_CNN = [[16, 3, 1]]  # Young & Tian 2019 (MinAtar): one 3x3 conv for 10x10 frames


class ConvEncoder(nn.Module):
    """Conv layers (ReLU after each) and a flatten, over any leading batch dims: ``[..., C, H, W] -> [..., F]``."""

    def __init__(self, in_shape: tuple[int, int, int], layers: list):
        super().__init__()
        convs: list[nn.Module] = []
        channels = in_shape[0]
        for out_channels, kernel, stride in layers:
            conv = nn.Conv2d(channels, int(out_channels), int(kernel), int(stride))
            nn.init.orthogonal_(conv.weight, 2**0.5)
            nn.init.zeros_(conv.bias)
            convs += [conv, nn.ReLU()]
            channels = int(out_channels)
        self.convs = nn.Sequential(*convs)
        self.in_shape = tuple(in_shape)
        with torch.no_grad():
            self.out_features = int(self.convs(torch.zeros(1, *in_shape)).numel())

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        lead = observation.shape[:-3]
        features = self.convs(observation.reshape(-1, *self.in_shape)).flatten(1)
        return features.reshape(*lead, self.out_features)


def cnn_layers(in_shape: tuple[int, int, int], cfg: ModelConfig) -> list:
    """``model.cnn_layers``, or the default for the frame size (Nature CNN needs at least 36 px)."""
    if cfg.cnn_layers:
        return cfg.cnn_layers
    return NATURE_CNN if min(in_shape[1:]) >= 36 else MINATAR_CNN


class SelectInputs(nn.Module):
    """The observation entries ``indices`` (``model.actor_inputs``), in that order, over any leading dims."""

    def __init__(self, indices: list[int], width: int):
        super().__init__()
        bad = [i for i in indices if not -width <= i < width]
        if bad:
            raise UserError(
                f"model.actor_inputs {bad}: the observation has {width} entries (0 to {width - 1}, or negative "
                "from the end)"
            )
        self.register_buffer("indices", torch.tensor([i % width for i in indices], dtype=torch.long))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return observation.index_select(-1, self.indices)


def network(
    observation_spec, out_features: int, cfg: ModelConfig, *, out_gain: float = 1.0, inputs: list[int] | None = None
) -> nn.Module:
    """Observation -> ``out_features``: an MLP for vectors; for images (``[C, H, W]``) a CNN, sized from
    the spec, feeding the MLP head (``model.hidden_sizes``). ``inputs``: only these observation entries
    (``model.actor_inputs``: vectors only)."""
    spec = observation_spec["observation"]
    image = len(spec.shape) == 4
    encoder = cfg.encoder if cfg.encoder != "auto" else ("cnn" if image else "mlp")
    if inputs and (encoder != "mlp" or image):
        raise UserError("model.actor_inputs selects entries of a vector observation; this env's are images")
    if encoder == "mlp" and inputs:
        select = SelectInputs(list(inputs), observation_size(observation_spec))
        return nn.Sequential(select, mlp(len(inputs), out_features, cfg, out_gain=out_gain))
    if encoder == "mlp":
        return mlp(observation_size(observation_spec), out_features, cfg, out_gain=out_gain)
    if not image:
        raise UserError(
            f"model.encoder=cnn needs image observations ([H, W, C] per env); this env's are {tuple(spec.shape[1:])}"
        )
    in_shape = tuple(int(d) for d in spec.shape[1:])
    try:
        conv = ConvEncoder(in_shape, cnn_layers(in_shape, cfg))
    except RuntimeError as exc:  # a kernel larger than what is left of the frame
        raise UserError(f"model.cnn_layers do not fit frames of shape {in_shape}: {str(exc).splitlines()[0]}") from None
    return nn.Sequential(conv, mlp(conv.out_features, out_features, cfg, out_gain=out_gain))


def action_kind(action_spec: TensorSpec, *, algo: str = "ppo") -> str:
    """``discrete`` (categorical index), or ``continuous`` (Box); anything else is a clear error."""
    if isinstance(action_spec, (Categorical, OneHot)):
        return "discrete"
    if isinstance(action_spec, Bounded) and action_spec.dtype.is_floating_point:
        if algo == "dqn":
            from rlpilot.config.load import preset_names

            # continuous-action examples first, then a pointer to the rest (the line stays readable as presets grow)
            names = preset_names()
            examples = [name for name in ("ppo-pendulum", "sac-pendulum", "td3-pendulum") if name in names]
            raise UserError(
                f"DQN needs a discrete action space, but this env's actions are continuous (Box); use PPO, SAC or TD3 "
                f"instead (rlpilot train sac ENV, or presets such as {', '.join(examples)}; rlpilot presets lists "
                "the others)"
            )
        return "continuous"
    raise UserError(f"unsupported action spec {type(action_spec).__name__}: Discrete or bounded Box only")


class GaussianHead(nn.Module):
    """``obs -> (loc, scale)`` with a state-independent learned log std (the PPO default everywhere)."""

    def __init__(self, body: nn.Module, action_dim: int, init_log_std: float):
        super().__init__()
        self.body = body
        self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.body(observation)
        return loc, self.log_std.exp().expand_as(loc)


class Envelope(nn.Module):
    """``body`` with a safe fallback (``model.fallback_margin``): where any input entry lies outside
    ``[low, high]`` (the range of the inputs it was trained on, widened by ``margin`` standard deviations each way),
    the output is 0, the actor's mean at the middle of its action box: under a gain schedule, the base controller
    as built. Why the range and not a distance: every input the student was trained on is inside it by construction
    (no fallback where it was taught), a plant beyond what it was taught shows as an error, a temperature or an
    action history outside what any taught plant produced, and the test is a comparison per entry, which exports as
    plain torch operations. Unarmed (``armed`` 0: no statistics yet) it is ``body`` exactly."""

    def __init__(self, body: nn.Module, width: int, margin: float):
        super().__init__()
        self.body, self.margin = body, float(margin)
        self.register_buffer("low", torch.zeros(width))
        self.register_buffer("high", torch.zeros(width))
        self.register_buffer("armed", torch.zeros(()))

    def fit(self, inputs: torch.Tensor) -> None:
        """Arms the envelope on ``inputs`` (``[N, width]``, what the actor is trained on)."""
        spread = self.margin * inputs.std(0)
        self.low.copy_(inputs.min(0).values - spread)
        self.high.copy_(inputs.max(0).values + spread)
        self.armed.fill_(1.0)

    def outside(self, observation: torch.Tensor) -> torch.Tensor:
        """``[..., 1]``: True where the fallback acts."""
        beyond = ((observation < self.low) | (observation > self.high)).any(-1, keepdim=True)
        return beyond & (self.armed > 0)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        out = self.body(observation)
        return torch.where(self.outside(observation), torch.zeros_like(out), out)


class GreedyActor(nn.Module):
    """Deterministic action from a policy network, as the env takes it (what evaluation and export run).

    Discrete (``bounds`` None): argmax of the logits or Q-values. Continuous: the Gaussian mean squashed
    by tanh into ``[low, high]`` (the mode of TanhNormal's transform), clamped against rounding.
    """

    def __init__(self, net: nn.Module, bounds: tuple[torch.Tensor, torch.Tensor] | None = None, *, one_hot: int = 0):
        super().__init__()
        self.net = net
        self.one_hot = one_hot  # > 0: discrete actions are returned as one-hot vectors of this size
        self.continuous = bounds is not None
        low, high = bounds if bounds is not None else (torch.zeros(0), torch.zeros(0))
        self.register_buffer("low", low.detach().clone().float())
        self.register_buffer("high", high.detach().clone().float())

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.finish(self.net(observation))

    def finish(self, out) -> torch.Tensor:
        """The action from the network's output ``out``."""
        if not self.continuous:
            index = out.argmax(-1)
            return nn.functional.one_hot(index, self.one_hot) if self.one_hot else index
        loc = out[0] if isinstance(out, tuple) else out
        action = (self.high + self.low) / 2 + (self.high - self.low) / 2 * torch.tanh(loc)
        return torch.maximum(torch.minimum(action, self.high), self.low)
