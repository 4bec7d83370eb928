"""Central DP: publish the Adult cube age x sex x occupation x income.

1. Predict every mechanism's error on the queries we care about (no data touched, no budget).
2. Release with the best one, charged to a budget.
3. Save, reload, answer queries with their expected error, write an HTML report.
"""

import fugu
from fugu.datasets import adult, adult_domain
from fugu.report.release_report import write_release_report

dom = adult_domain(["age", "sex", "occupation", "income"])
workload = fugu.random_workload(dom, 500, n_predicates=(1, 4), seed=0)

rec = fugu.central.recommend(dom, workload, epsilon=1.0)
print("predicted RMSE per mechanism:", {k: round(v, 1) for k, v in rec.rmse.items()})
print("recommended:", rec.best)

hist = fugu.Histogram.from_records(adult(), dom)
budget = fugu.Accountant(total=1.0)
mechanisms = {
    "laplace": fugu.central.laplace,
    "hierarchical": fugu.central.hierarchical,
    "privelet": fugu.central.privelet,
}
rel = mechanisms[rec.best](hist, epsilon=1.0, accountant=budget)
print(budget.report())

path = rel.save("adult-cube.npz")
rel = fugu.Release.load(path)
for q in [
    fugu.RangeQuery({"age": (20, 29), "occupation": "White-collar"}),
    fugu.RangeQuery({"sex": "Female", "income": ">50K"}),
]:
    print(f"{q}: {rel.answer(q):,.0f} +/- {rel.expected_error(q):,.0f}")

try:
    fugu.central.laplace(hist, epsilon=0.5, accountant=budget)
except fugu.BudgetExceededError as exc:
    print("refused:", exc)

out = write_release_report(
    [("Adult cube", rel)],
    "adult-cube-report.html",
    truth=lambda d: fugu.Histogram.from_records(adult(), d).counts,
    n_queries=200,
)
print("report:", out)
