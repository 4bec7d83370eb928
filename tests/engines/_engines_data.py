"""Seeded data and toy partial functions shared by the engine tests (pickled by value to Spark)."""

from __future__ import annotations

from typing import Any

import numpy as np

import fugu

N_ROWS = 20_000
C_VALUES = 24  # size of the OLH-like value domain
G_BUCKETS = 4
CENTRES = np.array([[-10.0, -10.0], [0.0, 5.0], [12.5, -3.5]])


def domain() -> fugu.Domain:
    jobs = fugu.Hierarchy.from_dict(
        {"any": {"white": ["clerk", "exec"], "blue": ["craft", "farm"]}}
    )
    return fugu.Domain(
        [
            fugu.Ordinal("age", 17, 90),
            fugu.Nominal("job", jobs),
            fugu.Ordinal("gain", edges=[0, 0.5, 10, 1e3, 1e5]),
        ]
    )


def records(n: int = N_ROWS, seed: int = 7) -> dict[str, np.ndarray]:
    """Skewed columns (geometric ages, a dominant job, heavy-tailed gains) plus report and point
    columns: ``seed``/``y`` (OLH-like reports), ``v`` (a value), ``x``/``y2`` (points on a
    half-integer grid, so float sums are exact in any order)."""
    rng = np.random.default_rng(seed)
    age = np.minimum(17 + rng.geometric(0.05, n), 90).astype(np.int64)
    job = rng.choice(
        np.array(["clerk", "exec", "craft", "farm"], dtype=object), n, p=[0.7, 0.1, 0.1, 0.1]
    )
    gain = np.where(rng.random(n) < 0.6, 0.0, rng.lognormal(4, 2, n)).clip(0, 1e5)
    v = rng.integers(0, C_VALUES, n)
    seeds = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.int64)
    y = rng.integers(0, G_BUCKETS, n)
    x = rng.integers(-40, 41, n) / 2.0
    y2 = rng.integers(-40, 41, n) / 2.0
    return {"age": age, "job": job, "gain": gain, "v": v, "seed": seeds, "y": y, "x": x, "y2": y2}


def _hash(seed: np.ndarray, value: np.ndarray | int) -> np.ndarray:
    """A toy 64-bit mixing hash of (seed, value) (splitmix-style), vectorised."""
    h = np.asarray(seed, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    h ^= np.asarray(value, dtype=np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(31)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(29)
    return h


def olh_like_support(batch: Any) -> dict[str, np.ndarray]:
    """support[v] = #{reports i : H(seed_i, v) mod g == y_i} and the number of reports."""
    seed, y = np.asarray(batch["seed"]), np.asarray(batch["y"]).astype(np.uint64)
    support = np.zeros(C_VALUES, dtype=np.int64)
    for v in range(C_VALUES):
        support[v] = int(np.count_nonzero(_hash(seed, v) % np.uint64(G_BUCKETS) == y))
    return {"support": support, "n": np.array([seed.size], dtype=np.int64)}


def hashed_key(batch: Any) -> np.ndarray:
    """One key per row: the bucket of H(seed, v) among C_VALUES (an OLH-like hashing key)."""
    return (_hash(np.asarray(batch["seed"]), np.asarray(batch["v"])) % np.uint64(C_VALUES)).astype(
        np.int64
    )


def nearest_centre(batch: Any) -> np.ndarray:
    """The k-means assignment step for fixed public centres: index of the nearest centre."""
    pts = np.stack([np.asarray(batch["x"]), np.asarray(batch["y2"])], axis=1)
    d = ((pts[:, None, :] - CENTRES[None, :, :]) ** 2).sum(axis=2)
    return np.argmin(d, axis=1).astype(np.int64)


def kmeans_partial(batch: Any) -> dict[str, np.ndarray]:
    """Per-cluster sizes and coordinate sums (one Lloyd iteration's statistics)."""
    lab = nearest_centre(batch)
    k = CENTRES.shape[0]
    sums = np.stack(
        [np.bincount(lab, weights=np.asarray(batch[c]), minlength=k) for c in ("x", "y2")], axis=1
    )
    return {"sizes": np.bincount(lab, minlength=k).astype(np.int64), "sums": sums}


def failing_key(batch: Any) -> np.ndarray:
    """A key function that fails on rows with v == 13 (an executor-side error)."""
    v = np.asarray(batch["v"])
    if (v == 13).any():
        raise ValueError("value 13 is not allowed in column 'v'")
    return v.astype(np.int64)
