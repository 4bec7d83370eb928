"""A local-DP deployment: users' devices randomise, the server only ever sees reports.

The "app" below randomises each user's record one at a time with the per-record client path and
writes JSON lines, as devices would send them; the server validates and aggregates the file.
"""

import json

import fugu
from fugu.datasets import adult, adult_domain

dom = adult_domain(["age", "hours_per_week"])
cols = adult()
n = len(cols["age"])
protocol = fugu.ldp.HDG(dom, epsilon=1.0, n_users=n)  # public: shipped with the app

# --- on the devices -------------------------------------------------------------------------
client = protocol.client()
with open("reports.jsonl", "w") as f:
    f.write(json.dumps(client.header()) + "\n")
    for i in range(2000):  # the per-record path, as one device would run it
        record = {"age": int(cols["age"][i]), "hours_per_week": int(cols["hours_per_week"][i])}
        f.write(json.dumps(client.perturb_one(record)) + "\n")
# the rest of the population, vectorised (same randomiser, same wire format)
rest = client.perturb({k: cols[k][2000:] for k in dom.names})
rest.save("reports-rest.jsonl")

# --- on the server --------------------------------------------------------------------------
agg = protocol.aggregator()
agg.add(fugu.ldp.Reports.load("reports.jsonl"))
agg.add(fugu.ldp.Reports.load("reports-rest.jsonl"))
print("accepted", agg.n_accepted, "rejected", agg.n_rejected)
rel = agg.estimate()
q = fugu.RangeQuery({"age": (30, 39), "hours_per_week": (40, 60)})
print(f"{q}: {rel.answer(q):,.0f} (expected error {rel.expected_error(q):,.0f})")
print(rel.guarantee.describe())
rel.save("ldp-release.npz")
