"""Privelet and Privelet+: ε-DP data cubes through wavelet transforms.

Privacy model: central ε-differential privacy. Neighbours: replace one record (default, the
paper's setting: the cube changes by δ = 2 in L1) or add/remove one record (δ = 1).

Source: Xiao, Wang, Gehrke, "Differential Privacy via Wavelet Transforms", ICDE 2010 / TKDE
23(8) 2011 (seed ``004_…``): the Haar and nominal transforms, the multi-dimensional HN transform,
Privelet+; restated in ``specs/blowfish_privelet_hierarchical.md`` §B.

Mechanism. Transform the cube M with the HN transform (Haar along ordinal axes, the nominal
transform along nominal axes, no transform along Privelet+'s ``plain`` axes), add noise of scale
λ / W(c) to every coefficient c, subtract sibling means along nominal axes, invert.

Sensitivity. The coefficient family has *generalized sensitivity* ρ = Π_i P(A_i) with respect to
the weights W(c) = Π_i W_i(c_i): for any two cubes, Σ_c W(c)|c(M) − c(M')| ≤ ρ‖M − M'‖₁
(P = 1 + log2 m for Haar over m = 2^k padded entries; P = h, the hierarchy height, for the
nominal transform; P = 1 untransformed). Hence the coefficients have weighted L1 sensitivity
Δ = δρ, and noise of scale λ/W(c) with λ = Δ/ε is ε-DP (Privelet Lemma 1 / Theorem 2).

Public base coefficient (replace-one, every attribute transformed). The coefficient that is the
base coefficient on every axis is a fixed multiple of the total n (Haar: n/Π m_i; nominal: n),
and n is the same in every replace-one neighbour, so it is released exactly and not noised. Its
weighted change per unit change of one entry is exactly Π_i 1 = 1 (every axis's base coefficient
contributes W·|Δc| = 1 to that axis's P), so the remaining coefficients have weighted L1
sensitivity Δ = 2(ρ − 1) instead of 2ρ (fugu's refinement; e.g. 24 instead of 26 for 4,096
cells). With an untransformed attribute the "base" coefficients are per-value marginals, which
are not public, and Δ = 2ρ as in the paper; under add/remove n is not public and Δ = ρ.

Noise. Coefficients are real, so fugu rounds them to a power-of-two grid and adds exact discrete
Laplace noise on that grid (as :func:`fugu.noise.grid_laplace` does), increasing the sensitivity
by the rounding slack (``guarantee.parameters["effective_sensitivity"]``, at most Δ·(1 + 2⁻¹⁰)).
The weights enter by rescaling: noise λ/W(c) on c is noise λ on W(c)·c, and the rescaled
coefficients have plain L1 sensitivity Δ (the generalized sensitivity), so every coefficient
shares one grid and one scale (this is DPComp's unnormalised form of the same mechanism);
dividing by the public W(c) is post-processing. W(c)·c is computed exactly — an integer (Haar:
the total or sum(left) − sum(right)) or an integer over the public denominator 2f − 2 per
nominal axis (:func:`fugu.central.wavelets.hn_forward_exact`) — and rounded to the grid once
(:func:`grid_units`): the slack covers that one rounding, not float error in the transform
(which reached 128 grid steps at 2^47 records and lost up to 1.003ε, review 12). The privacy
loss of any neighbouring pair is then at most ε exactly. Large cubes are noised in slabs with
the same grid and scale.

Error. A range query's noise variance is exactly 2λ² Π_i Σ_c a_i(c)² / W_i(c)², where a_i is the
query's coefficient row on axis i after mean subtraction (:meth:`AxisTransform.adjoint`); the
paper's bound is 2λ² Π_i H(A_i) with H = (2 + log2 m)/4 (Haar), 4 (nominal), |A| (plain), i.e.
O(polylog(m)/ε²) instead of Basic's O(m/ε²) for large ranges.

Privelet+ rule (``plain="auto"``): an attribute is left untransformed when
|A| ≤ P(A)²·H(A) — transforming it would multiply the variance bound by more than leaving
its values as separate sub-cubes does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..budget import Accountant
from ..domain import Domain
from ..errors import DomainError, InvalidParameterError
from ..histogram import Histogram, require_histogram
from ..mechanism import (
    check_epsilon_range,
    guarantee,
    histogram_sensitivity,
    start,
    total_is_public,
)
from ..noise import (
    GRID_MAX_UNITS,
    MAX_SCALE,
    GridNoise,
    RandomSource,
    discrete_laplace,
    grid_capacity,
    grid_granularity,
    grid_scale,
)
from ..queries import RangeQuery
from ..release import CubeRelease, Guarantee
from ..release_state import Array, Meta
from .wavelets import (
    AxisTransform,
    HaarTransform,
    IdentityTransform,
    NominalTransform,
    generalized_sensitivity,
    hn_forward_exact,
    hn_inverse,
    hn_project,
    hn_weights,
    transform_for,
)

__all__ = [
    "privelet",
    "PriveletRelease",
    "choose_plain",
    "privelet_variance",
    "privelet_transforms",
]

PlainSpec = str | Sequence[str] | None

SOURCE = (
    "Xiao, Wang, Gehrke, Differential Privacy via Wavelet Transforms (ICDE 2010), "
    "Lemma 1, Theorems 2-4; generalized sensitivity Π P(A_i)"
)


def _auto_plain_one(transform: AxisTransform, size: int) -> bool:
    return size <= transform.P**2 * transform.H


def choose_plain(domain: Domain) -> list[str]:
    """Privelet+'s S_A by the paper's rule: untransformed when |A| ≤ P(A)²·H(A).

    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("age", 0, 100), fugu.Ordinal("income", 0, 999)])
    >>> choose_plain(dom)
    ['age']
    """
    out = []
    for attr in domain.attributes:
        if attr.size == 1:
            out.append(attr.name)
            continue
        t = transform_for(attr, plain=False)
        if _auto_plain_one(t, attr.size):
            out.append(attr.name)
    return out


def _resolve_plain(domain: Domain, plain: PlainSpec) -> list[str]:
    if plain is None:
        return []
    if isinstance(plain, str):
        if plain == "auto":
            return choose_plain(domain)
        plain = [p for p in plain.split(",") if p]
    try:
        names = list(plain)
    except TypeError:
        names = [plain]  # type: ignore[list-item]
    if any(not isinstance(p, str) for p in names):
        raise InvalidParameterError(
            f"plain must be 'auto', None, or attribute names (a list, or one comma-separated "
            f"string) from {list(domain.names)}, got {plain!r}"
        )
    for p in names:
        if p not in domain.names:
            raise DomainError(
                f"plain names an unknown attribute {p!r}; the domain's attributes are "
                f"{list(domain.names)} (or use plain='auto' or plain=None)"
            )
    return names


def privelet_transforms(domain: Domain, plain: PlainSpec = "auto") -> list[AxisTransform]:
    """The per-axis transforms Privelet(+) uses for ``domain``."""
    names = set(_resolve_plain(domain, plain))
    return [transform_for(a, a.name in names) for a in domain.attributes]


def public_base(
    transforms: list[AxisTransform], neighbours: str, total_public: bool = True
) -> bool:
    """True when the all-base coefficient is the public total: replace-one, nothing plain, and
    the total public (``total_public``: no records dropped, see
    :func:`fugu.mechanism.total_is_public`)."""
    return (
        total_public
        and histogram_sensitivity(neighbours) == 2
        and all(not isinstance(t, IdentityTransform) or t.n == 1 for t in transforms)
    )


def coefficient_sensitivity(
    transforms: list[AxisTransform], neighbours: str, total_public: bool = True
) -> float:
    """Weighted L1 sensitivity of the noised coefficients: δρ, or 2(ρ − 1) with a public base."""
    rho = generalized_sensitivity(transforms)
    if public_base(transforms, neighbours, total_public):
        return 2.0 * (rho - 1.0)
    return histogram_sensitivity(neighbours) * rho


def sensitivity_from(
    transforms: list[AxisTransform], neighbours: str, total_public: bool = True
) -> str:
    """How the release's sensitivity Δ follows from ρ and the neighbour relation (for the
    guarantee: Δ is 2(ρ − 1), 2ρ or ρ, and the paper states only ρ)."""
    rho = generalized_sensitivity(transforms)
    sens = coefficient_sensitivity(transforms, neighbours, total_public)
    if public_base(transforms, neighbours, total_public):
        return (
            f"2(rho - 1) = {sens:g}, rho = {rho:g}: replace-one changes two cells by 1 (Lemma 1's "
            f"2 rho), and the all-base coefficient, a fixed multiple of the public n, is "
            f"released exactly, so its weighted change (2) is not counted"
        )
    if histogram_sensitivity(neighbours) == 2:
        why = (
            "the histogram counts only some records: dropped outside the domain or selected by an "
            "SQL query, so n is private"
            if not total_public
            else "untransformed attributes make the base coefficients per-value marginals"
        )
        return (
            f"2 rho = {sens:g}: replace-one changes two cells by 1 (Lemma 1, Theorem 2); the "
            f"base coefficients are noised ({why})"
        )
    return f"rho = {sens:g}: add/remove changes one cell by 1 (Lemma 1, Theorem 2)"


def privelet_lambda(
    domain: Domain, epsilon: float, plain: PlainSpec = "auto", neighbours: str = "replace"
) -> float:
    """The noise magnitude λ = Δ / ε (before grid rounding, which adds < 0.1%)."""
    ts = privelet_transforms(domain, plain)
    return coefficient_sensitivity(ts, neighbours) / epsilon


def _axis_rows(
    bounds: NDArray[np.int64], axis: int, n: int
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Unique 0/1 query rows of one axis and the index mapping each query to its row."""
    pairs = bounds[:, axis, :]
    uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
    j = np.arange(n)
    rows = ((j >= uniq[:, :1]) & (j < uniq[:, 1:])).astype(np.float64)
    return rows, inv.reshape(-1)


def _axis_factors(
    t: AxisTransform, rows: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Σ_c a_c²/W_c² per query row, and the base coefficient's term (a_0/W_0)²."""
    full, base = [], []
    for i in range(0, len(rows), 256):
        a = t.adjoint(np.atleast_2d(rows[i : i + 256])) / t.weights
        full.append(np.sum(a**2, axis=-1))
        base.append(a[:, 0] ** 2)
    return np.concatenate(full), np.concatenate(base)


def _variance_from_transforms(
    transforms: list[AxisTransform],
    unit_var: float,
    bounds: NDArray[np.int64],
    exact_base: bool = False,
) -> NDArray[np.float64]:
    b = np.asarray(bounds, dtype=np.int64)
    total = np.full(b.shape[0], unit_var)
    base = np.full(b.shape[0], unit_var)
    for ax, t in enumerate(transforms):
        rows, inv = _axis_rows(b, ax, t.n)
        full_f, base_f = _axis_factors(t, rows)
        total *= full_f[inv]
        base *= base_f[inv]
    if exact_base:  # the all-base coefficient carries no noise
        return np.maximum(total - base, 0.0)
    return total


def privelet_variance(
    domain: Domain,
    bounds: NDArray[np.int64],
    epsilon: float,
    plain: PlainSpec = "auto",
    neighbours: str = "replace",
) -> NDArray[np.float64]:
    """Noise variance of each query (bounds (m, d, 2)) under Privelet(+), without any data."""
    ts = privelet_transforms(domain, plain)
    lam = coefficient_sensitivity(ts, neighbours) / epsilon
    return _variance_from_transforms(ts, 2.0 * lam * lam, bounds, public_base(ts, neighbours))


class PriveletRelease(CubeRelease):
    """A Privelet / Privelet+ cube. ``expected_error`` is the exact noise RMSE of an answer."""

    kind = "privelet"
    _state_fields = (
        Array("estimate", "counts", shape="domain"),
        Meta("plain", "str-list"),
        Meta("lam", float),
        Meta("unit_variance", float, nullable=True, default=None),
        Meta("exact_base", bool, default=False),
    )

    def __init__(
        self,
        domain: Domain,
        guarantee: Guarantee,
        estimate: Any,
        *,
        plain: list[str],
        lam: float,
        unit_variance: float | None = None,
        exact_base: bool = False,
    ) -> None:
        super().__init__(domain, guarantee, estimate)
        self.plain = list(plain)
        self.lam = float(lam)
        #: the all-base coefficient is the public total (replace-one, nothing plain): no noise
        self.exact_base = bool(exact_base)
        #: exact variance of the noise on a weight-1 coefficient (discrete Laplace on the grid)
        self.unit_variance = float(unit_variance) if unit_variance is not None else 2 * lam * lam
        self._transforms: list[AxisTransform] | None = None

    @property
    def transforms(self) -> list[AxisTransform]:
        if self._transforms is None:
            assert self.domain is not None
            self._transforms = privelet_transforms(self.domain, self.plain)
        return self._transforms

    def expected_error(self, query: RangeQuery | Mapping[str, Any]) -> float | None:
        q = query if isinstance(query, RangeQuery) else RangeQuery(dict(query))
        assert self.domain is not None
        var = _variance_from_transforms(
            self.transforms, self.unit_variance, q.bounds(self.domain)[None], self.exact_base
        )
        return float(math.sqrt(var[0]))

    def expected_variance_many(self, bounds: NDArray[np.int64]) -> NDArray[np.float64]:
        """Noise variance of many queries given as bounds (m, d, 2)."""
        return _variance_from_transforms(
            self.transforms, self.unit_variance, bounds, self.exact_base
        )


def _max_changed(transforms: list[AxisTransform], delta: int) -> int:
    return int(delta * np.prod([t.max_changed for t in transforms]))


#: Coefficients noised per call; bounds the sampler's working memory on large cubes.
SLAB = 1 << 21


def noise_grid(sens: float, max_changed: int, n_coef: int) -> tuple[int, float]:
    """``(m, γ)``: the number of coefficients one neighbour can move (``max_changed``, capped
    at ``n_coef``) and the power-of-two grid step for (sensitivity, m), as
    :func:`fugu.noise.grid_laplace` chooses it. Public: no data."""
    m = max(1, min(int(max_changed), int(n_coef)))
    return m, float(grid_granularity(sens, m))


def smallest_epsilon(sens: float, max_changed: int, n_coef: int) -> float:
    """The smallest ε whose noise scale in grid steps, λ/γ = noise_scale(eff, ε)/γ, stays
    within the sampler's limit :data:`fugu.noise.MAX_SCALE` (exact: γ is a power of two, so
    eff / (γ·2^52) is the exact bound and noise_scale rounds up to at most γ·2^52 from it).
    Public; checked before the budget is spent. 0 when nothing is noised."""
    if sens <= 0:
        return 0.0
    m, gamma = noise_grid(sens, max_changed, n_coef)
    eff = grid_scale(sens, 1.0, m, gamma)[0]
    return float(eff / (gamma * MAX_SCALE))


def grid_units(num: NDArray[Any], den: NDArray[Any] | None, gamma: float) -> NDArray[np.int64]:
    """round(num / den / γ) (half to even, like ``np.rint``), exactly, as a flat int64 array.

    ``num`` and ``den`` (broadcast against ``num``; None for 1) are the exact integer
    numerators and denominators of the weighted coefficients (:func:`hn_forward_exact`) and
    γ = 2^g a power of two: integer long division, one rounding. The caller has checked (before
    spending budget) that every |num/den| is within the grid's 2^62 units.

    >>> grid_units(np.array([1, 5, -7]), np.array([3, 2, 6]), 0.25).tolist()   # 4/3, 10, -14/3
    [1, 10, -5]
    """
    g = math.frexp(gamma)[1] - 1
    if gamma != math.ldexp(1.0, g):  # pragma: no cover - grids are powers of two
        raise InvalidParameterError(f"internal error: grid step {gamma!r} is not a power of two")
    shift = -g  # units = num / den · 2^shift
    obj = num.dtype == object
    if shift < 0 or (den is not None and not obj and int(np.max(den)) >= 2**40):  # rare
        num = num.astype(object)
        den = (np.ones(1, dtype=object) if den is None else den.astype(object)) << max(0, -shift)
        shift, obj = max(0, shift), True
    if den is None:
        out = num.reshape(-1) * (1 << shift)
        return np.asarray(out, dtype=np.int64)
    num = num.reshape(1) if num.ndim == 0 else num
    den = np.asarray(den).reshape((1,) * (num.ndim - np.ndim(den)) + np.shape(den))
    step = shift if obj else 62 - int(np.max(den)).bit_length()
    if not obj and int(np.max(np.abs(num), initial=0)) < 1 << max(0, 62 - shift):
        num = num << shift  # num·2^shift fits in int64: one division, the same result
        shift = 0
    result = np.empty(num.shape, dtype=np.int64)
    rows = num.shape[0]
    block = rows if obj else max(1, SLAB // max(1, num.size // max(1, rows)))
    for lo in range(0, rows, block):  # blocks of rows: bounded temporaries on large cubes
        n = num[lo : lo + block]
        d = den if den.shape[0] == 1 else den[lo : lo + block]
        q, r = (n // d, n % d) if obj else np.divmod(n, d)  # floor: 0 <= r < d
        left = shift
        while left > 0:  # long division, ``step`` bits at a time (r·2^step stays below 2^62)
            k = min(step, left)
            dq, r = ((r * (1 << k)) // d, (r * (1 << k)) % d) if obj else np.divmod(r << k, d)
            q = q * (1 << k) + dq
            left -= k
        twice = 2 * r
        up = np.asarray(twice > d, dtype=bool)
        up |= np.asarray(twice == d, dtype=bool) & np.asarray(q % 2 == 1, dtype=bool)
        result[lo : lo + block] = np.asarray(q + up, dtype=np.int64)
    return result.reshape(-1)


def add_grid_noise(
    units: NDArray[np.int64],
    sens: float,
    eps: float,
    source: RandomSource,
    max_changed: int,
    exact: Sequence[int] | NDArray[np.int64] = (),
) -> tuple[NDArray[np.float64], GridNoise]:
    """Discrete Laplace noise on the grid of :func:`noise_grid` for values already rounded
    exactly to it (``units``, flat int64, the weighted coefficients in grid steps, L1
    sensitivity ``sens``, at most ``max_changed`` of them move): what
    :func:`fugu.noise.grid_laplace` draws (:func:`fugu.noise.grid_scale`: effective sensitivity
    ``sens + m·γ``, scale λ = that / ε, both rounded up), with no float rounding of the values
    before the noise. Noised in slabs of :data:`SLAB` (one grid and scale for all). ``exact``
    holds flat indices of public coefficients (the all-base coefficient under replace-one):
    their noise is drawn with the rest and discarded. Returns the noisy values (grid units
    times γ, as doubles) and the grid record.
    """
    m, gamma = noise_grid(sens, max_changed, units.size)
    eff, lam = grid_scale(sens, eps, m, gamma)
    if units.size and not float(np.max(np.abs(units))) <= GRID_MAX_UNITS:  # pragma: no cover
        # check_grid_range refused such histograms before the budget was spent
        raise InvalidParameterError("internal error: a coefficient is beyond the noise grid")
    scale = lam / gamma  # exact: γ is a power of two
    out = np.empty(units.size, dtype=np.float64)
    for lo in range(0, units.size, SLAB):
        part = units[lo : lo + SLAB]
        noise = discrete_laplace(scale, size=part.size, rng=source)
        out[lo : lo + SLAB] = (part + noise).astype(np.float64) * gamma
    idx = np.asarray(exact, dtype=np.int64)
    out[idx] = units[idx].astype(np.float64) * gamma
    info = GridNoise(
        granularity=np.array([gamma]),
        sensitivity=float(sens),
        effective_sensitivity=eff,
        scale=np.array([lam]),
    )
    return out, info


def noise_coefficients(
    coef: NDArray[np.float64],
    sens: float,
    eps: float,
    source: RandomSource,
    max_changed: int,
    exact: Sequence[int] | NDArray[np.int64] = (),
) -> GridNoise | None:
    """Noise exact weighted coefficients in place (L1 sensitivity ``sens``); keep ``exact``
    exact. ``coef`` must hold the exact values (integers, say: Haar's weighted coefficients):
    they are rounded to the grid once, here. :func:`privelet` computes its coefficients exactly
    with :func:`hn_forward_exact` and :func:`grid_units` instead. ``sens == 0`` (every
    coefficient public) draws nothing and returns None.
    """
    if sens <= 0:
        return None
    flat = coef.reshape(-1)
    _, gamma = noise_grid(sens, max_changed, flat.size)
    with np.errstate(over="ignore", invalid="ignore"):
        units = np.rint(flat / gamma)
    if flat.size and not np.max(np.abs(units)) <= GRID_MAX_UNITS:
        raise InvalidParameterError(
            f"coef: a coefficient is beyond the noise grid's 2**62 steps of {gamma:g} (the value "
            "is not shown: it is private); check a public bound before spending budget"
        )
    noisy, info = add_grid_noise(units.astype(np.int64), sens, eps, source, max_changed, exact)
    flat[:] = noisy
    return info


def _clamp_to_grid(
    num: NDArray[Any],
    den: NDArray[Any] | None,
    hist: Histogram,
    sens: float,
    max_changed: int,
    n_coef: int,
) -> tuple[NDArray[Any], NDArray[Any] | None]:
    """With a private n (add/remove, or a total that is not the number of records) the weighted
    coefficients are clamped to the noise grid's public range instead of refusing on n
    (:func:`check_grid_range`: n = 2^49 released and its neighbour 2^49 + 1 was refused, which
    told them apart). Clamping each coefficient is 1-Lipschitz, so the L1 sensitivity holds;
    it changes only histograms of more than the range's records (about 2^49 or more)."""
    _, limit = grid_capacity(sens, noise_grid(sens, max_changed, n_coef)[0])
    if not float(np.abs(np.asarray(hist.counts, dtype=np.float64)).sum()) > limit:
        return num, den  # |W(c)·c| <= n: nothing can reach the bound
    cap = int(math.floor(limit))
    num_o = np.asarray(num).astype(object)
    den_o = np.ones(1, dtype=object) if den is None else np.asarray(den).astype(object)
    hi = np.broadcast_to(den_o, num_o.shape) * cap
    return np.maximum(np.minimum(num_o, hi), -hi), den_o


def check_grid_range(hist: Histogram, sens: float, max_changed: int, n_coef: int) -> None:
    """Refuse, before any budget is spent, a histogram whose coefficients could leave the noise
    grid's range (:func:`fugu.noise.grid_laplace` accepts |value| ≤ 2**62 grid units).

    Every weighted coefficient W(c)·c is at most the total count in magnitude (each record moves
    it by at most 1: the all-base coefficient is n), and the grid γ depends only on the public
    (sensitivity, max_changed), so the bound n·(1 + 2^-20) ≤ 2^62·γ keeps the sampler's range
    check from ever failing. Without it, that check raised after the accountant was charged, on
    the data's size (a 10-value nominal attribute, γ = 2^-13: n = 2^49 released, 2^49 + 1
    raised). Used only when n is public (replace-one, every record counted): with a private n
    a refusal on it tells neighbours apart, and :func:`_clamp_to_grid` clamps instead.
    """
    if sens <= 0:
        return
    gamma, limit = grid_capacity(sens, noise_grid(sens, max_changed, n_coef)[0])
    total = float(np.abs(np.asarray(hist.counts, dtype=np.float64)).sum())
    if total > limit:
        raise InvalidParameterError(
            f"hist: Privelet's noise grid for this domain ({gamma:g}, sensitivity {sens:g}) "
            f"holds histograms of at most {limit:.6g} records, and this one has more; count in "
            f"larger units (e.g. thousands) or use fugu.central.laplace / hierarchical"
        )


def privelet(
    hist: Histogram,
    epsilon: float,
    *,
    plain: PlainSpec = "auto",
    neighbours: str = "replace",
    rng: RandomSource | None = None,
    accountant: Accountant | None = None,
) -> PriveletRelease:
    """Release ``hist`` with Privelet (``plain=None``) or Privelet+ (``plain="auto"`` or names).

    Parameters
    ----------
    hist : Histogram
        The exact cube (any mix of ordinal and nominal attributes).
    epsilon : float
        Privacy-loss bound, > 0.
    plain : "auto", None, or list of attribute names
        Attributes left untransformed (Privelet+'s S_A). ``"auto"`` applies the paper's rule
        (see :func:`choose_plain`); ``None`` transforms every attribute (plain Privelet).
    neighbours : {"replace", "add-remove"}
        Replace one record (δ = 2, the paper's setting) or add/remove one (δ = 1).
    rng : RandomSource, optional
        Secure by default; a seeded source is reproducible and NOT private.
    accountant : Accountant, optional
        Charged ε before the data is touched.

    Returns
    -------
    PriveletRelease
        Unbiased cube; ``expected_error(q)`` is the exact RMSE of ``answer(q)``.

    Examples
    --------
    >>> import fugu
    >>> dom = fugu.Domain([fugu.Ordinal("age", 0, 15)])
    >>> hist = fugu.Histogram.from_records({"age": [1, 2, 2, 9, 15]}, dom)
    >>> rel = fugu.central.privelet(hist, epsilon=1.0, plain=None, rng=fugu.RandomSource(seed=1))
    >>> rel.guarantee.sensitivity   # replace-one: 2 · log2 16 (the base coefficient is public)
    8.0
    >>> rel.expected_error({"age": (0, 15)})   # the total: only c_0, the public n
    0.0
    >>> round(float(rel.counts.sum()), 6)
    5.0
    """
    hist = require_histogram(hist)
    dom = hist.domain
    delta = histogram_sensitivity(neighbours)
    plain_names = _resolve_plain(dom, plain)
    transforms = [transform_for(a, a.name in plain_names) for a in dom.attributes]
    rho = generalized_sensitivity(transforms)
    total_public = total_is_public(neighbours, hist)
    exact_base = public_base(transforms, neighbours, total_public)
    sens = coefficient_sensitivity(transforms, neighbours, total_public)
    n_coef = int(np.prod([t.n_coef for t in transforms]))
    max_changed = _max_changed(transforms, delta)
    if total_public:  # n public: refuse on it before the charge
        check_grid_range(hist, sens, max_changed, n_coef)
    check_epsilon_range(
        epsilon,
        mechanism="privelet",
        minimum=smallest_epsilon(sens, max_changed, n_coef),
        why=(
            "the noise scale in grid steps, effective sensitivity / (epsilon · grid step), "
            "would exceed the sampler's limit 2**52"
        ),
    )
    eps, source = start(epsilon, rng, accountant, "privelet cube", neighbours=neighbours)
    weights = hn_weights(transforms)
    # Privelet's noise λ/W(c) on c is noise λ on W(c)·c (the unnormalised form DPComp uses):
    # the scaled coefficients have plain L1 sensitivity Δ, so one grid and one noise scale serve
    # every coefficient; dividing by the public W(c) afterwards is post-processing. W(c)·c is
    # computed exactly (integer numerators over public denominators) and rounded to the grid
    # once: float transforms erred by up to |W(c)·c|·2^-52, beyond the grid's slack for large n.
    num, den = hn_forward_exact(hist.counts, transforms)
    shape = num.shape
    info: GridNoise | None = None
    if sens > 0:
        _, gamma = noise_grid(sens, max_changed, n_coef)
        if not total_public:
            num, den = _clamp_to_grid(num, den, hist, sens, max_changed, n_coef)
        units = grid_units(num, den, gamma)
        del num
        noisy, info = add_grid_noise(
            units, sens, eps, source, max_changed, [0] if exact_base else []
        )
        del units
        coef = noisy.reshape(shape)
    else:  # every coefficient is public (one cell): the total, exactly
        coef = np.asarray(num, dtype=np.float64) / (1 if den is None else den)
    coef /= weights
    estimate = hn_inverse(hn_project(coef, transforms), transforms)
    del coef
    eff = info.effective_sensitivity if info is not None else 0.0
    lam = float(info.scale[0]) if info is not None else 0.0
    if info is not None:
        unit_var = float(info.variance().reshape(-1)[0])
    else:
        unit_var = 0.0
    kinds = {
        a.name: ("plain" if a.name in plain_names else t.kind)
        for a, t in zip(dom.attributes, transforms, strict=True)
    }
    g = guarantee(
        model="central-dp",
        epsilon=eps,
        neighbours=neighbours,
        mechanism="privelet+" if plain_names else "privelet",
        rng=source,
        sensitivity=float(sens),
        source=SOURCE,
        parameters={
            "plain": plain_names,
            "transforms": kinds,
            "generalized_sensitivity": rho,
            "sensitivity_from": sensitivity_from(transforms, neighbours, total_public),
            "base_coefficient": "public total, not noised (replace-one)"
            if exact_base
            else "noised",
            "effective_sensitivity": eff,
            "grid": float(info.granularity.reshape(-1)[0]) if info is not None else None,
            "lambda": lam,
            "noise": "discrete Laplace on a power-of-two grid, scale lambda / W(c)",
            "reconstruction": "sibling-mean subtraction on nominal axes, then the inverse transform"
            if any(isinstance(t, NominalTransform) for t in transforms)
            else "inverse transform",
            "padding": {
                t_attr.name: t.n_coef
                for t_attr, t in zip(dom.attributes, transforms, strict=True)
                if isinstance(t, HaarTransform) and t.m != t.n
            },
        },
        data_options=hist.data_options,
    )
    if not np.all(np.isfinite(estimate)):  # pragma: no cover - defensive
        raise InvalidParameterError(
            "Privelet produced non-finite estimates; the counts are too large"
        )
    return PriveletRelease(
        dom,
        g,
        estimate,
        plain=plain_names,
        lam=lam,
        unit_variance=unit_var,
        exact_base=exact_base,
    )
