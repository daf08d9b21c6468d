"""Doctor's rules for multi-agent runs (mappo, ippo), added to the control rules (PPO's apply as they are).

- ``agent_entropy_collapse``: one agent's policy turned (nearly) deterministic while the others still
  explore: that agent stopped trying anything new, and the group's return is capped by it.
- ``critic_blind``: an IPPO critic explains little of the returns: each agent's value depends on where
  the others are, which its own observation may not show; MAPPO's centralised critic sees them.
- ``agents_unequal``: interchangeable agents (one shared policy) end with very different returns.
"""

from __future__ import annotations

import math

import numpy as np

from rlpilot.common.findings import Finding
from rlpilot.doctor.control import RULES as CONTROL_RULES
from rlpilot.doctor.view import Rule, RunView, tail

COLLAPSED = 0.1
"""An agent's entropy below this share of the uniform policy's (log of the number of actions) is collapsed..."""
EXPLORING = 0.4
"""...while another agent's above this share still explores."""
BLIND_EV = 0.3
"""Explained variance of the value targets below which a critic is not seeing what it needs."""


def _agent_columns(v: RunView, prefix: str) -> dict[int, np.ndarray]:
    keys = sorted({key for row in v.rows for key in row if key.startswith(prefix)})
    return {int(key.removeprefix(prefix)): v.present(key)[1] for key in keys}


def rule_agent_entropy_collapse(v: RunView) -> list[Finding]:
    entropies = _agent_columns(v, "ppo/entropy_agent")
    actions = v.meta.get("env_facts", {}).get("action", {}).get("n")
    if len(entropies) < 2 or not actions or v.did_well or min(len(e) for e in entropies.values()) < 4:
        return []
    uniform = math.log(actions)
    last = {agent: float(np.mean(tail(values))) / uniform for agent, values in entropies.items()}
    collapsed = [agent for agent, share in last.items() if share < COLLAPSED]
    exploring = [agent for agent, share in last.items() if share > EXPLORING]
    if not collapsed or not exploring:
        return []
    return [
        Finding(
            rule="agent_entropy_collapse",
            severity="warning",
            title=f"agent(s) {collapsed} stopped exploring while agent(s) {exploring} still explore",
            evidence={f"entropy_share_agent{a}": round(s, 3) for a, s in last.items()},
            cause="an agent's policy became deterministic early (entropy under 10% of uniform over the last "
            "quarter): it no longer tries actions that could help the group",
            fix=v.cmd(f"ppo.entropy_coef={max(0.01, 2 * v.config.ppo.entropy_coef):g}", "marl.share_parameters=true"),
        )
    ]


def rule_critic_blind(v: RunView) -> list[Finding]:
    _, ev = v.present("ppo/explained_variance")
    if v.config.algo != "ippo" or v.did_well or len(ev) < 4:
        return []
    late = float(np.mean(tail(ev)))
    if late >= BLIND_EV:
        return []
    if v.origin.get("config_file"):  # a config file names its algorithm: the file is what changes
        fix = f"set algo: mappo in {v.origin['config_file']}, then {v.cmd()}"
    else:
        fix = v.cmd(
            target=v.target.replace("ippo", "mappo", 1) if v.origin.get("preset") else f"mappo {v.config.env.id}"
        )
    return [
        Finding(
            rule="critic_blind",
            severity="warning",
            title=f"per-agent critics explain {late:.2f} of the returns' variance",
            evidence={"explained_variance_last_quarter": round(late, 3), "algo": "ippo"},
            cause="each agent's return depends on the other agents (shared reward terms, collisions); an IPPO "
            "critic sees only its own agent's observation",
            fix=f"{fix}  (a centralised critic sees every agent's observation)",
        )
    ]


def rule_agents_unequal(v: RunView) -> list[Finding]:
    returns = _agent_columns(v, "eval/return_agent")
    if len(returns) < 2 or not v.config.marl.share_parameters or v.did_well:
        return []
    last = {agent: float(values[-1]) for agent, values in returns.items() if len(values)}
    spread = max(last.values()) - min(last.values())
    scale = max(1e-6, float(np.mean(np.abs(list(last.values())))))
    if spread < 0.5 * scale:
        return []
    return [
        Finding(
            rule="agents_unequal",
            severity="info",
            title=f"agents' greedy returns differ by {spread:.3g} (group mean {np.mean(list(last.values())):.3g})",
            evidence={f"eval_return_agent{a}": round(r, 3) for a, r in last.items()},
            cause="with one shared policy, agents differ only through their observations and ids: some end up "
            "with the easy roles (the nearest landmark) and others with none",
            fix="nothing wrong by itself; if one agent keeps losing, compare with marl.agent_id=false or "
            "marl.share_parameters=false",
        )
    ]


RULES: list[Rule] = [*CONTROL_RULES, rule_agent_entropy_collapse, rule_critic_blind, rule_agents_unequal]
"""A multi-agent run's rules: the control rules (PPO's apply), then the group's own."""
