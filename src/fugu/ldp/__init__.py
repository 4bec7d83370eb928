"""Local differential privacy: frequency oracles, Square Wave, multi-dimensional range queries."""
