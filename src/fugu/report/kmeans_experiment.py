"""The Blowfish paper's k-means experiment: objective ratio of private to non-private k-means.

For each repetition a data-independent start (k uniform points of the domain, public seed) is
drawn; non-private Lloyd from that start gives the reference objective; then private k-means
(:mod:`fugu.blowfish.kmeans`) runs from the same start for every (policy, ε). The ratio
objective(private) / objective(non-private) is summarised over repetitions by its mean and
quartiles — the quantities of the paper's Figure 1 (seed ``000_…``, experiments section:
k = 4, 10 iterations, 50 repetitions, ε ∈ {0.1, …, 1.0}, L1 distance-threshold, attribute and
partition policies against the Laplace mechanism G^full).

This is a tool for the data owner (the non-private objective uses the raw data); the private
runs use a seeded random source, so nothing here is itself a private release.

Example
-------
>>> import numpy as np, fugu
>>> from fugu.report.kmeans_experiment import objective_ratio_experiment
>>> dom = fugu.Domain([fugu.Ordinal("x", 0, 99), fugu.Ordinal("y", 0, 99)])
>>> X = np.random.default_rng(0).integers(0, 100, size=(500, 2))
>>> res = objective_ratio_experiment(X, dom, [None, "distance:theta=10"], epsilons=[1.0],
...                                  repetitions=3, seed=1)
>>> sorted(r.policy for r in res.rows)
['distance:theta=10', 'laplace']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..blowfish.kmeans import (
    MODES,
    IterationPlan,
    KMeansGrid,
    _make_assigner,
    kmeans_objective,
    kmeans_sensitivities,
    lloyd,
    random_init,
    secret_graph,
    su_plan,
)
from ..domain import Domain
from ..errors import InvalidParameterError, check_epsilon, check_positive_int
from ..noise import RandomSource

__all__ = ["RatioRow", "KMeansExperiment", "objective_ratio_experiment", "PAPER_EPSILONS"]

#: ε grid of the paper's Figure 1.
PAPER_EPSILONS = tuple(round(0.1 * i, 1) for i in range(1, 11))


@dataclass(frozen=True)
class RatioRow:
    """Objective ratio private / non-private for one (policy, ε) over the repetitions."""

    policy: str
    epsilon: float
    mean: float
    q25: float
    median: float
    q75: float
    mean_objective: float
    repetitions: int


@dataclass
class KMeansExperiment:
    """Result of :func:`objective_ratio_experiment`."""

    dataset: str
    n: int
    dim: int
    n_clusters: int
    n_iter: int
    repetitions: int
    mode: str
    rows: list[RatioRow]
    sensitivities: dict[str, tuple[float, float]]
    baseline_objective: float
    seconds: float
    policies: list[str] = field(default_factory=list)

    def row(self, policy: str, epsilon: float) -> RatioRow:
        for r in self.rows:
            if r.policy == policy and abs(r.epsilon - epsilon) < 1e-12:
                return r
        raise KeyError((policy, epsilon))

    @property
    def epsilons(self) -> list[float]:
        return sorted({r.epsilon for r in self.rows})

    def laplace_gain(self, policy: str, epsilon: float) -> float:
        """mean objective(Laplace) / mean objective(policy): the paper's Figure 1(d) quantity."""
        return (
            self.row("laplace", epsilon).mean_objective / self.row(policy, epsilon).mean_objective
        )

    def table(self, stat: str = "mean") -> str:
        """Text table: one row per ε, one column per policy (``stat`` = mean|median|q25|q75)."""
        return self._text_table(lambda r: _fmt(getattr(r, stat)))

    def quartile_table(self) -> str:
        """Like :meth:`table` with ``mean [q25, q75]`` in every cell."""
        return self._text_table(lambda r: f"{_fmt(r.mean)} [{_fmt(r.q25)}, {_fmt(r.q75)}]")

    def _text_table(self, cell: Callable[[RatioRow], str]) -> str:
        """One row per ε, one column per policy, ``cell(row)`` in each, right-aligned."""
        pols = self.policies
        lines = [["eps"] + pols]
        for e in self.epsilons:
            lines.append([f"{e:g}"] + [cell(self.row(p, e)) for p in pols])
        widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
        out = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sensitivities"] = {k: list(v) for k, v in self.sensitivities.items()}
        return d

    def figure(self) -> Any:
        """Matplotlib figure: mean ratio vs ε per policy, quartile band, log scale."""
        from . import matplotlib_agg

        plt = matplotlib_agg()
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        eps = self.epsilons
        for p in self.policies:
            rows = [self.row(p, e) for e in eps]
            (line,) = ax.plot(eps, [r.mean for r in rows], marker="o", ms=3, label=p)
            ax.fill_between(
                eps,
                [r.q25 for r in rows],
                [r.q75 for r in rows],
                color=line.get_color(),
                alpha=0.15,
            )
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("objective ratio (private / non-private)")
        ax.set_title(
            f"{self.dataset}: n={self.n:,}, d={self.dim}, k={self.n_clusters}, "
            f"{self.mode} sensitivities"
        )
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.legend(fontsize=7)
        fig.tight_layout()
        return fig

    def add_to_report(self, report: Any) -> None:
        """Add the ratio table and figure to a :class:`fugu.report.Report`."""
        pols = self.policies
        report.add_figure(
            f"k-means objective ratio: {self.dataset}",
            self.figure(),
            caption=f"Mean over {self.repetitions} repetitions; band = lower to upper quartile. "
            f"1 = as good as non-private Lloyd from the same start.",
        )
        rows = [[f"{e:g}"] + [f"{self.row(p, e).mean:.3g}" for p in pols] for e in self.epsilons]
        report.add_table(
            f"Objective ratio (mean), {self.dataset}",
            ["epsilon"] + pols,
            rows,
            caption="sensitivities (q_size, q_sum): "
            + "; ".join(f"{p}: {s[0]:g}, {s[1]:g}" for p, s in self.sensitivities.items()),
        )


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.2e}"


def objective_ratio_experiment(
    X: ArrayLike,
    domain: Domain,
    policies: Sequence[Any],
    *,
    epsilons: Sequence[float] = PAPER_EPSILONS,
    n_clusters: int = 4,
    n_iter: int | str = 10,
    repetitions: int = 50,
    sensitivity: str = "safe",
    size_fraction: float | str = 0.5,
    seed: int = 0,
    dataset: str = "data",
    names: Sequence[str] | None = None,
    clip: bool = False,
) -> KMeansExperiment:
    """Run the paper's experiment on points ``X`` (n × d) in ``domain``.

    Parameters
    ----------
    policies : list
        Policies as accepted by :class:`~fugu.blowfish.kmeans.KMeans` (None = Laplace / ε-DP,
        strings such as ``'distance:theta=128'``, ``fugu.blowfish.Policy`` objects).
    epsilons : list of float
        Total ε of one fit (all iterations); default the paper's 0.1, 0.2, …, 1.0.
    sensitivity : "safe" or "paper"
        Calibration mode (see :mod:`fugu.blowfish.kmeans`); ``paper`` reproduces the paper.
    n_iter, size_fraction : int / float, or "auto"
        The paper's 10 updates and equal split by default; ``"auto"`` uses Su et al.'s plan
        (:func:`fugu.blowfish.kmeans.su_plan`) for each policy and ε, as ``KMeans`` does (the
        non-private reference then runs 10 iterations). Every run starts from the same public
        uniform start (the experiment's design), never from the private grid start.
    seed : int
        Seeds the public starts and the (reproducible, non-private) noise.
    names : list of str, optional
        Column labels for the policies (default: None → ``laplace``, others their description).
    clip : bool
        Clip out-of-domain points to the box, as ``KMeans(clip=True)`` does (default: refuse
        them).

    Returns
    -------
    KMeansExperiment
    """
    if sensitivity not in MODES:
        raise InvalidParameterError(f"sensitivity must be 'safe' or 'paper', got {sensitivity!r}")
    k = check_positive_int(n_clusters, "n_clusters", 1)
    auto_iter = isinstance(n_iter, str)
    if auto_iter and n_iter != "auto":
        raise InvalidParameterError(f"n_iter must be 'auto' or an integer >= 1, got {n_iter!r}")
    iters = 10 if auto_iter else check_positive_int(n_iter, "n_iter", 1)
    if isinstance(size_fraction, str) and size_fraction != "auto":
        raise InvalidParameterError(
            f"size_fraction must be 'auto' or a number in (0, 1), got {size_fraction!r}"
        )
    reps = check_positive_int(repetitions, "repetitions", 1)
    eps_list = [check_epsilon(e) for e in epsilons]
    if not policies:
        raise InvalidParameterError("give at least one policy (None = the Laplace baseline)")
    if not eps_list:
        raise InvalidParameterError("epsilons is empty; give at least one epsilon")
    if names is not None and len(names) != len(policies):
        raise InvalidParameterError(
            f"names must give one label per policy ({len(policies)}), got {len(names)}"
        )
    grid = KMeansGrid.from_domain(domain)
    pts = np.asarray(X, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != grid.dim:
        raise InvalidParameterError(f"X must have shape (n, {grid.dim}), got {pts.shape}")
    codes = grid.encode(pts, clip=bool(clip))
    points = grid.to_points(codes)
    if k > points.shape[0]:
        raise InvalidParameterError(
            f"n_clusters={k} exceeds the number of points {points.shape[0]}"
        )
    setups = []
    labels = []
    sens: dict[str, tuple[float, float]] = {}
    for i, pol in enumerate(policies):
        graph = secret_graph(pol, grid)
        name = names[i] if names is not None else ("laplace" if pol is None else graph.label)
        s = kmeans_sensitivities(graph, grid, sensitivity)
        sens[name] = s
        labels.append(name)
        setups.append((name, _make_assigner(graph, grid, codes), s))
    twice = sorted({n for n in labels if labels.count(n) > 1})
    if twice:
        # rows are keyed by label: two policies with one label had their ratios pooled
        raise InvalidParameterError(
            f"two policies have the same label {twice}; pass each policy once, or distinct "
            f"names=[...]"
        )
    t0 = time.perf_counter()
    ratios: dict[tuple[str, float], list[float]] = {(n, e): [] for n in labels for e in eps_list}
    objectives: dict[tuple[str, float], list[float]] = {
        (n, e): [] for n in labels for e in eps_list
    }
    base_objs = []
    for r in range(reps):
        init = random_init(grid, k, RandomSource(seed=seed * 1_000_003 + r))
        base = kmeans_objective(points, lloyd(points, init, iters, grid)[0])
        base_objs.append(base)
        noise = RandomSource(seed=seed * 1_000_003 + 500_009 + r)
        for name, assign, (s_size, s_sum) in setups:
            for e in eps_list:
                su = su_plan(points.shape[0], k, grid.high - grid.low, e, s_size, s_sum)
                t = su.n_iter if auto_iter else iters
                frac = su.size_fraction if isinstance(size_fraction, str) else size_fraction
                plans = [IterationPlan.split(e / t, s_size, s_sum, frac)] * t
                centres, _ = lloyd(points, init, t, grid, assign, plans, noise)
                obj = kmeans_objective(points, centres)
                objectives[(name, e)].append(obj)
                ratios[(name, e)].append(obj / base if base > 0 else float("inf"))
    rows = []
    for name in labels:
        for e in eps_list:
            v = np.asarray(ratios[(name, e)])
            q25, med, q75 = np.quantile(v, [0.25, 0.5, 0.75])
            rows.append(
                RatioRow(
                    name,
                    e,
                    float(v.mean()),
                    float(q25),
                    float(med),
                    float(q75),
                    float(np.mean(objectives[(name, e)])),
                    reps,
                )
            )
    return KMeansExperiment(
        dataset=dataset,
        n=int(points.shape[0]),
        dim=grid.dim,
        n_clusters=k,
        n_iter=iters,
        repetitions=reps,
        mode=sensitivity,
        rows=rows,
        sensitivities=sens,
        baseline_objective=float(np.mean(base_objs)),
        seconds=time.perf_counter() - t0,
        policies=labels,
    )
