"""Offline scheduling of a cluster snapshot: `kopfsched simulate`."""
