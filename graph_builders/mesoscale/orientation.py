"""Crystal orientations: unit quaternions, Bunge Euler angles and cubic misorientation.

Convention: a quaternion ``q = (w, x, y, z)`` (scalar first) describes the *active* rotation that takes
vectors from the crystal frame to the sample frame, ``v_sample = R(q) @ v_crystal``. Bunge Euler angles
``(phi1, Phi, phi2)`` (radians) describe the same orientation: ``R = Rz(phi1) Rx(Phi) Rz(phi2)``, i.e. the
usual passive Bunge matrix ``g = R.T`` takes sample coordinates to crystal coordinates.
"""

from __future__ import annotations

import itertools

import numpy as np

from graph_builders.mesoscale.errors import MicrostructureError

#: Quaternion norms within this relative distance of 1 are silently normalised; others are an error.
UNIT_TOLERANCE = 1e-2


def quaternion_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of quaternion arrays [..., 4] (broadcasting)."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, dtype=np.float64), -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quaternion_conjugate(q: np.ndarray) -> np.ndarray:
    """Conjugate (= inverse for unit quaternions) of quaternions [..., 4]."""
    out = np.array(q, dtype=np.float64, copy=True)
    out[..., 1:] *= -1.0
    return out


def euler_to_quaternion(euler: np.ndarray) -> np.ndarray:
    """Bunge Euler angles [..., 3] (phi1, Phi, phi2; radians) -> unit quaternions [..., 4], w >= 0."""
    e = np.asarray(euler, dtype=np.float64)
    phi1, big_phi, phi2 = np.moveaxis(e, -1, 0)
    c, s = np.cos(big_phi / 2.0), np.sin(big_phi / 2.0)
    q = np.stack(
        [
            c * np.cos((phi1 + phi2) / 2.0),
            s * np.cos((phi1 - phi2) / 2.0),
            s * np.sin((phi1 - phi2) / 2.0),
            c * np.sin((phi1 + phi2) / 2.0),
        ],
        axis=-1,
    )
    return canonical_hemisphere(q)


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """Unit quaternions [..., 4] -> rotation matrices [..., 3, 3] (crystal -> sample)."""
    w, x, y, z = np.moveaxis(np.asarray(q, dtype=np.float64), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=-1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=-1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1),
        ],
        axis=-2,
    )


def matrix_to_quaternion(matrix: np.ndarray) -> np.ndarray:
    """Rotation matrices [..., 3, 3] -> unit quaternions [..., 4] with w >= 0 (Shepperd's method)."""
    m = np.asarray(matrix, dtype=np.float64)
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    # four candidate (unnormalised) quaternions; pick the numerically largest per matrix
    cand = np.stack(
        [
            np.stack([1 + m00 + m11 + m22, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                      m[..., 1, 0] - m[..., 0, 1]], axis=-1),
            np.stack([m[..., 2, 1] - m[..., 1, 2], 1 + m00 - m11 - m22, m[..., 0, 1] + m[..., 1, 0],
                      m[..., 0, 2] + m[..., 2, 0]], axis=-1),
            np.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 - m00 + m11 - m22,
                      m[..., 1, 2] + m[..., 2, 1]], axis=-1),
            np.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1],
                      1 - m00 - m11 + m22], axis=-1),
        ],
        axis=-2,
    )  # [..., 4 candidates, 4]
    pick = np.argmax(np.stack([m00 + m11 + m22, m00, m11, m22], axis=-1), axis=-1)
    q = np.take_along_axis(cand, pick[..., None, None], axis=-2)[..., 0, :]
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return canonical_hemisphere(q)


def canonical_hemisphere(q: np.ndarray) -> np.ndarray:
    """Flip quaternions so that w >= 0 (q and -q are the same rotation)."""
    q = np.asarray(q, dtype=np.float64)
    return np.where(q[..., :1] < 0.0, -q, q)


def cubic_symmetry_quaternions() -> np.ndarray:
    """The 24 proper rotations of the cube (point group 432) as quaternions [24, 4]; row 0 is identity."""
    mats = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            m = np.zeros((3, 3))
            m[np.arange(3), perm] = signs
            if np.linalg.det(m) > 0:
                mats.append(m)
    quats = matrix_to_quaternion(np.array(mats))
    order = np.argsort(-quats[:, 0], kind="stable")  # identity first
    return quats[order]


def misorientation_angle(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Misorientation angle (radians, in [0, 62.8 deg]) between cubic orientations q1 and q2 [..., 4].

    The smallest rotation angle of ``q1^-1 q2 s`` over the 24 cubic symmetry rotations ``s``.
    """
    delta = quaternion_multiply(quaternion_conjugate(q1), q2)  # [..., 4]
    sym = cubic_symmetry_quaternions()
    # scalar part of delta * s = delta . (s_w, -s_x, -s_y, -s_z)
    w = np.abs(delta @ (sym * np.array([1.0, -1.0, -1.0, -1.0])).T)  # [..., 24]
    return 2.0 * np.arccos(np.clip(w.max(axis=-1), 0.0, 1.0))


def random_quaternions(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` uniformly random orientations (normalised 4-D Gaussians), w >= 0."""
    q = rng.standard_normal((count, 4))
    return canonical_hemisphere(q / np.linalg.norm(q, axis=1, keepdims=True))


def rotation_vector_to_quaternion(rotvec: np.ndarray) -> np.ndarray:
    """Rotation vectors [..., 3] (axis * angle, radians) -> unit quaternions [..., 4]."""
    v = np.asarray(rotvec, dtype=np.float64)
    angle = np.linalg.norm(v, axis=-1, keepdims=True)
    axis = np.divide(v, angle, out=np.zeros_like(v), where=angle > 0)
    return np.concatenate([np.cos(angle / 2.0), np.sin(angle / 2.0) * axis], axis=-1)


def as_quaternions(orientations: np.ndarray | None, count: int, name: str) -> np.ndarray:
    """Validate orientations for ``count`` grains: None -> identity, [count, 3] Bunge Euler angles
    (radians), or [count, 4] quaternions (normalised when within UNIT_TOLERANCE of unit length).

    Returns float64 [count, 4] unit quaternions with w >= 0; raises MicrostructureError naming ``name``.
    """
    if orientations is None:
        q = np.zeros((count, 4))
        q[:, 0] = 1.0
        return q
    arr = np.asarray(orientations, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != count or arr.shape[1] not in (3, 4):
        raise MicrostructureError(
            f"{name}: orientations must be [{count}, 4] quaternions or [{count}, 3] Euler angles, "
            f"got shape {arr.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
    if bad.size:
        raise MicrostructureError(f"{name}: orientations contain NaN or inf (rows {bad[:10].tolist()})")
    if arr.shape[1] == 3:
        return euler_to_quaternion(arr)
    norm = np.linalg.norm(arr, axis=1)
    zero = np.flatnonzero(norm < 1e-12)
    if zero.size:
        raise MicrostructureError(f"{name}: zero quaternions (rows {zero[:10].tolist()})")
    far = np.flatnonzero(np.abs(norm - 1.0) > UNIT_TOLERANCE)
    if far.size:
        raise MicrostructureError(
            f"{name}: non-unit quaternions (rows {far[:10].tolist()}, norms "
            f"{np.round(norm[far[:10]], 6).tolist()}); expected norm 1 within {UNIT_TOLERANCE}"
        )
    return canonical_hemisphere(arr / norm[:, None])
