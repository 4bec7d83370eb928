"""Node and edge differential privacy for subgraph counts and joins (Recursive Mechanism)."""
