"""Blowfish: protect only what needs protecting.

Ages: hide a person's age to within 5 years (distance policy), release range counts with the
Ordered Mechanism, and compare with central DP. Locations: k-means under a partition policy.
"""

import fugu
from fugu.blowfish.kmeans import KMeans, kmeans_objective
from fugu.datasets import adult_histogram
from fugu.demo import geo_points

hist = adult_histogram(["age"])
policy = fugu.blowfish.Policy.distance_threshold(hist.domain, theta=5)
cumulative = fugu.blowfish.CumulativeHistogram()
print(
    "sensitivity of the cumulative histogram:",
    fugu.blowfish.sensitivity(cumulative, policy),
    "(distance 5) vs",
    fugu.blowfish.sensitivity(cumulative, fugu.blowfish.Policy.full(hist.domain)),
    "(DP)",
)

q = fugu.RangeQuery({"age": (30, 39)})
blowfish = fugu.blowfish.ordered(hist, epsilon=1.0, policy=policy)
central = fugu.central.hierarchical(hist, epsilon=1.0)
print(
    f"ages 30-39: Blowfish {blowfish.answer(q):,.0f} +/- {blowfish.expected_error(q):.1f}; "
    f"central DP {central.answer(q):,.0f} +/- {central.expected_error(q):.1f}"
)
print(blowfish.guarantee.describe())

X, dom = geo_points()
for policy_text in (None, "partition:x=40,y=30"):
    fits = [KMeans(4, epsilon=0.5, policy=policy_text, domain=dom).fit(X) for _ in range(5)]
    objectives = sorted(kmeans_objective(X, km.cluster_centers_) for km in fits)
    print(
        f"{policy_text or 'epsilon-DP'}: median objective {objectives[2]:.3g} over 5 fits; "
        f"sensitivities {fits[0].sensitivity_}"
    )
