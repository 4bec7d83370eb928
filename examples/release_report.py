"""An HTML report of several releases: guarantees in plain words, expected errors, heatmaps.

The first report is shareable (released values only); the second adds the true data and is for
the publisher only.
"""

import networkx as nx

import fugu
from fugu.datasets import adult, adult_domain
from fugu.report.release_report import write_release_report

dom = adult_domain(["age", "occupation"])
hist = fugu.Histogram.from_records(adult(), dom)
releases = [
    ("privelet+ at epsilon 1", fugu.central.privelet(hist, epsilon=1.0, plain="auto")),
    ("laplace at epsilon 0.5", fugu.central.laplace(hist, epsilon=0.5)),
    ("karate triangles (node DP)", fugu.graph.count(nx.karate_club_graph(), "triangle", 1.0)),
]
print("shareable:", write_release_report(releases, "releases.html", n_queries=200))
print(
    "publisher only:",
    write_release_report(
        releases,
        "releases-with-truth.html",
        truth=lambda d: fugu.Histogram.from_records(adult(), d).counts,
        n_queries=200,
    ),
)
