"""Blowfish privacy: policies, policy-specific sensitivity, Ordered mechanisms, private k-means."""
