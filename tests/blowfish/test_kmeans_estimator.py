"""KMeans estimator: scikit-learn interface, budget accounting, update rule, accuracy, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import fugu
from fugu.blowfish.kmeans import (
    IterationPlan,
    KMeans,
    KMeansGrid,
    SecretGraph,
    _update,
    kmeans_objective,
    lloyd,
    random_init,
    release_iteration,
)
from fugu.errors import DomainError, InvalidParameterError, PolicyError

DOM = fugu.Domain([fugu.Ordinal("x", 0, 99), fugu.Ordinal("y", 0, 99)])


def blobs(n: int = 2000, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed)
    centres = np.array([[20, 20], [80, 25], [50, 80]])
    pts = centres[gen.integers(0, 3, n)] + gen.normal(0, 6, (n, 2))
    return np.clip(np.rint(pts), 0, 99)


def test_fit_attributes_and_shapes() -> None:
    X = blobs()
    km = KMeans(3, 1.0, domain=DOM, rng=fugu.RandomSource(seed=1)).fit(X)
    assert km.cluster_centers_.shape == (3, 2)
    assert km.labels_.shape == (len(X),)
    assert km.n_iter_ == km.plan_.n_iter == 2  # Su et al.: n = 1,500 is small for 3 centres
    assert km.noisy_sizes_.shape == (2, 3)
    assert km.inertia_ == pytest.approx(kmeans_objective(X, km.cluster_centers_))
    assert np.all(km.cluster_centers_ >= 0) and np.all(km.cluster_centers_ <= 99)
    assert km.predict(X).tolist() == km.labels_.tolist()
    assert km.transform(X[:5]).shape == (5, 3)
    assert km.score(X) == pytest.approx(-km.inertia_)
    g = km.guarantee_
    assert g.model == "central-dp" and g.epsilon == 1.0 and g.mechanism == "kmeans"
    assert g.parameters["q_sum_sensitivity"] == 198.0
    spent = sum(g.parameters["epsilon_per_iteration"]) + g.parameters["epsilon_init"]
    assert spent == pytest.approx(1.0)  # sequential composition: start + updates = ε


def test_get_set_params_clone_and_pipeline() -> None:
    from sklearn.base import clone
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    km = KMeans(3, 0.5, policy="distance:theta=5", domain=DOM, n_iter=4)
    params = km.get_params()
    assert params["n_clusters"] == 3 and params["policy"] == "distance:theta=5"
    c = clone(km)
    assert c.get_params() == params and c is not km
    assert km.set_params(n_clusters=2).n_clusters == 2
    with pytest.raises(InvalidParameterError, match="invalid parameter"):
        km.set_params(bogus=1)
    X = np.hstack([blobs(), np.zeros((2000, 1))])
    pipe = Pipeline(
        [("cols", FunctionTransformer(lambda a: a[:, :2])), ("km", KMeans(3, 1.0, domain=DOM))]
    )
    labels = pipe.fit_predict(X)
    assert labels.shape == (2000,)
    assert "KMeans(" in repr(km) and "n_clusters=2" in repr(km)


def test_dataframe_and_mapping_input_by_column_name() -> None:
    import pandas as pd

    X = blobs(300)
    df = pd.DataFrame({"y": X[:, 1], "x": X[:, 0], "other": 1})
    a = KMeans(2, 1.0, domain=DOM, rng=fugu.RandomSource(seed=3)).fit(df)
    b = KMeans(2, 1.0, domain=DOM, rng=fugu.RandomSource(seed=3)).fit(X)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    with pytest.raises(DomainError, match="no column 'x'"):
        KMeans(2, 1.0, domain=DOM).fit({"y": X[:, 1]})


def test_accountant_is_charged_before_fitting() -> None:
    acct = fugu.Accountant(1.0)
    KMeans(2, 0.6, domain=DOM, accountant=acct).fit(blobs(100))
    assert acct.spent == pytest.approx(0.6)
    with pytest.raises(fugu.errors.BudgetExceededError):
        KMeans(2, 0.6, domain=DOM, accountant=acct).fit(blobs(100))


def test_budget_split_and_iteration_weights() -> None:
    km = KMeans(2, 2.0, domain=DOM, n_iter=4, iteration_weights=[1, 1, 1, 5], size_fraction=0.25)
    km.fit(blobs(200))
    per_iter = km.guarantee_.parameters["epsilon_per_iteration"]
    # the private grid start takes 20 % of ε; the rest follows the weights
    assert km.guarantee_.parameters["epsilon_init"] == pytest.approx(0.4)
    assert per_iter == pytest.approx([0.2, 0.2, 0.2, 1.0])
    free = KMeans(2, 2.0, domain=DOM, n_iter=4, iteration_weights=[1, 1, 1, 5], init="spread")
    per_iter = free.fit(blobs(200)).guarantee_.parameters["epsilon_per_iteration"]
    assert per_iter == pytest.approx([0.25, 0.25, 0.25, 1.25])  # a free start: all ε to updates
    plan = IterationPlan.split(1.0, 2.0, 10.0, 0.25)
    assert (plan.eps_size, plan.eps_sum) == (0.25, 0.75)
    assert IterationPlan.split(1.0, 0.0, 10.0, 0.25).eps_sum == 1.0  # exact sizes: all ε to sums
    assert IterationPlan.split(1.0, 2.0, 0.0, 0.25).eps_size == 1.0


def test_update_rule_keeps_centre_for_empty_or_negative_clusters_and_clamps() -> None:
    centres = np.array([[10.0, 10.0], [50.0, 50.0], [90.0, 90.0]])
    sizes = np.array([-3.0, 0.5, 10.0])
    sums = np.array([[100.0, 100.0], [5.0, 5.0], [10_000.0, -10.0]])
    grid = KMeansGrid.from_domain(DOM)
    new = _update(centres, sizes, sums, grid.centre, grid.low, grid.high, 1.0)
    np.testing.assert_array_equal(new[0], centres[0])  # negative size: kept
    np.testing.assert_array_equal(new[1], centres[1])  # below min_cluster_size: kept
    np.testing.assert_array_equal(new[2], [99.0, 48.5])  # 49.5 + 1000 clamped; 49.5 - 1


def test_policy_without_secret_pairs_is_refused() -> None:
    """Singleton blocks (or an explicit graph with no edge): no secret pairs; k-means under it
    would release exact centres labelled private, so it is refused (issue 14 item 2)."""
    X = blobs(500)
    rng = fugu.RandomSource(seed=9)
    with pytest.raises(PolicyError, match="no edge"):
        KMeans(3, 1.0, policy="partition:x=1,y=1", domain=DOM, rng=rng).fit(X)
    empty = SecretGraph("explicit", edges=np.zeros((0, 2), np.int64))
    with pytest.raises(PolicyError, match="no edge"):
        KMeans(3, 1.0, policy=empty, domain=DOM, rng=rng).fit(X)


def test_large_epsilon_approaches_nonprivate_and_small_epsilon_is_worse() -> None:
    """Objective ratio private / non-private from the same start: near 1 at ε = 500, larger at
    ε = 0.05 (20 seeded fits each; the means differ by orders of magnitude, false-failure rate
    negligible)."""
    X = blobs(3000)
    grid = KMeansGrid.from_domain(DOM)
    ratios: dict[float, list[float]] = {500.0: [], 0.05: []}
    for s in range(20):
        init = random_init(grid, 3, fugu.RandomSource(seed=100 + s))
        base = kmeans_objective(X, lloyd(X, init, 10, grid)[0])
        for eps in ratios:
            km = KMeans(3, eps, domain=DOM, init=init, rng=fugu.RandomSource(seed=s)).fit(X)
            ratios[eps].append(km.inertia_ / base)
    assert np.mean(ratios[500.0]) < 1.05
    assert np.mean(ratios[0.05]) > 2 * np.mean(ratios[500.0])


def test_sum_noise_has_the_stated_variance() -> None:
    """Empirical variance of released sums vs the exact discrete-Laplace variance (50,000 draws;
    a 5% relative tolerance is > 10 standard errors)."""
    plan = IterationPlan.split(1.0, 2.0, 40.0, 0.5)
    sizes, sums = release_iteration(
        [10, 20], np.zeros((2, 2)), plan, fugu.RandomSource(seed=2), repeats=50_000
    )
    expected_sum = 2 * (40.0 / 0.5) ** 2  # Laplace(b) variance 2b², grid fine enough
    assert np.var(sums, axis=0).ravel() == pytest.approx([expected_sum] * 4, rel=0.05)
    p = np.exp(-0.5 / 2.0)
    assert np.var(sizes, axis=0) == pytest.approx([2 * p / (1 - p) ** 2] * 2, rel=0.05)
    assert np.mean(sizes[:, 1]) == pytest.approx(20, abs=0.1)


@pytest.mark.parametrize(
    ("kwargs", "X", "error", "match"),
    [
        ({"n_clusters": 0}, None, InvalidParameterError, "n_clusters must be an integer >= 1"),
        ({"n_clusters": 5}, np.ones((4, 2)), InvalidParameterError, "exceeds the number of points"),
        ({"epsilon": -1.0}, None, InvalidParameterError, "epsilon must be > 0"),
        ({"epsilon": float("nan")}, None, InvalidParameterError, "finite"),
        ({}, np.array([[1.0, np.nan], [2, 3]]), DomainError, "NaN or infinite"),
        ({}, np.array([[1.0, 2], [200, 3]]), DomainError, "outside the domain"),
        ({}, np.ones((5, 3)), DomainError, "3 columns but the domain"),
        # no ⊥: n is public, and n = 0 < k is refused like any k > n (with ⊥: see
        # tests/foundation/test_empty_input_private_n.py)
        ({}, np.empty((0, 2)), InvalidParameterError, "n_clusters=2 exceeds .* n=0"),
        ({"size_fraction": 1.0}, None, InvalidParameterError, "size_fraction"),
        ({"init": "k-means++"}, None, InvalidParameterError, "data-independent"),
        ({"init": np.zeros((3, 2))}, None, InvalidParameterError, "shape"),
        ({"iteration_weights": [1, 2, 3]}, None, InvalidParameterError, "iteration_weights"),
        ({"sensitivity": "tight"}, None, InvalidParameterError, "'safe' or 'paper'"),
        ({"policy": "partition:z=3"}, None, Exception, "z"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, X, error, match) -> None:
    params = {"n_clusters": 2, "epsilon": 1.0, "domain": DOM} | kwargs
    with pytest.raises(error, match=match):
        KMeans(**params).fit(blobs(50) if X is None else X)


def test_domain_and_policy_mismatch_errors() -> None:
    from fugu.blowfish.policy import Policy

    other = fugu.Domain([fugu.Ordinal("x", 0, 99), fugu.Ordinal("y", 0, 49)])
    with pytest.raises(PolicyError, match="does not match"):
        KMeans(2, 1.0, policy=Policy.line(fugu.Domain([fugu.Ordinal("x", 0, 9)])), domain=DOM).fit(
            blobs(50)
        )
    with pytest.raises(PolicyError, match="does not match"):
        KMeans(2, 1.0, policy=Policy.attribute(other), domain=DOM).fit(blobs(50))
    three = fugu.Domain([fugu.Ordinal(n, 0, 9) for n in "abc"])
    with pytest.raises(DomainError, match="2 columns but the domain"):
        KMeans(2, 1.0, policy=Policy.distance_threshold(three, 2)).fit(np.ones((10, 2)))
    with pytest.raises(InvalidParameterError, match="bounded domain"):
        KMeans(2, 1.0).fit(blobs(50))
    nominal = fugu.Domain([fugu.Ordinal("x", 0, 9), fugu.Nominal("c", ["a", "b"])])
    with pytest.raises(DomainError, match="nominal"):
        KMeans(2, 1.0, domain=nominal).fit(np.ones((10, 2)))
    with pytest.raises(InvalidParameterError, match="not fitted"):
        KMeans(2, 1.0, domain=DOM).predict(blobs(5))


def test_policy_object_and_clip_are_recorded() -> None:
    from fugu.blowfish.policy import Policy

    X = np.vstack([blobs(200), [[150.0, -3.0]]])
    with pytest.warns(fugu.PrivacyLeakWarning):
        km = KMeans(
            3, 1.0, policy=Policy.distance_threshold(DOM, 10), clip=True, sensitivity="paper"
        ).fit(X)
    g = km.guarantee_
    assert g.model == "blowfish"
    assert g.data_options["out_of_domain"] == "clip"
    assert g.parameters["policy"] == "distance:theta=10"
    assert "warning" in g.parameters  # paper mode is flagged in the guarantee
    assert km.sensitivity_["q_sum"] == 10.0
