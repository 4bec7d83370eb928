"""Node- versus edge-private triangle counts (the Recursive Mechanism) on two small graphs."""

import networkx as nx
import numpy as np

import fugu

for name, G in [
    ("karate club", nx.karate_club_graph()),
    ("Les Miserables", nx.les_miserables_graph()),
]:
    G = nx.Graph(G)
    true = sum(nx.triangles(G).values()) // 3
    for unit in ("node", "edge"):
        values = [fugu.graph.count(G, "triangle", epsilon=1.0, unit=unit).value for _ in range(3)]
        print(f"{name}: {true} triangles; {unit}-DP releases {np.round(values, 1).tolist()}")

rel = fugu.graph.count(nx.karate_club_graph(), "2-star", epsilon=1.0, unit="edge")
print(rel.guarantee.describe())
rel.save("karate-2stars.npz")
