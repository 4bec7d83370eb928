"""Central ε-DP data cubes for range-count queries."""

from .laplace import laplace

__all__ = ["laplace"]
