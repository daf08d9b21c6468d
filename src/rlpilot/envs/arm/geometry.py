"""The arm's geometry, numpy only: link lengths, the elbow's limit, the reach the reference stays in, and the
kinematics the env computes with (its measured fingertip, its start pose).

Reacher's model (gymnasium/envs/mujoco/assets/reacher.xml): link0 is 0.1 m; the fingertip sits 0.11 m along
link1; the elbow (joint1) is limited to +-3.0 rad. The controllers' batched torch kinematics
(:mod:`rlpilot.envs.arm.controllers`) use the same numbers.
"""

from __future__ import annotations

import math

import numpy as np

LINK_1, LINK_2 = 0.1, 0.11
ELBOW_LIMIT = 3.0
REACH = (0.04, 0.19)  # the reference stays this far from the shoulder (m): inside |l1 - l2| .. l1 + l2


def tip_position(q: np.ndarray) -> np.ndarray:
    """Fingertip (x, y) for joint angles ``q`` = (q1, q2) (radians): the forward kinematics."""
    return np.array(
        [
            LINK_1 * math.cos(q[0]) + LINK_2 * math.cos(q[0] + q[1]),
            LINK_1 * math.sin(q[0]) + LINK_2 * math.sin(q[0] + q[1]),
        ]
    )


def joint_angles(point: np.ndarray) -> tuple[float, float]:
    """Joint angles (q1, q2) that put the fingertip at ``point`` (the elbow branch q2 >= 0): the inverse
    kinematics; a point out of reach gets the nearest pose."""
    x, y = float(point[0]), float(point[1])
    cos_q2 = np.clip((x * x + y * y - LINK_1**2 - LINK_2**2) / (2 * LINK_1 * LINK_2), -1.0, 1.0)
    q2 = math.acos(cos_q2)
    q1 = math.atan2(y, x) - math.atan2(LINK_2 * math.sin(q2), LINK_1 + LINK_2 * math.cos(q2))
    return q1, q2
