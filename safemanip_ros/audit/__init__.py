"""Recorded rollouts audited: replay of bags and traces into frames,
aggregation, statistics, reports and gating, on local processes or Ray.
Bags are opened through :mod:`safemanip_ros.bag`."""

# The package's modules (each imported where it is used: importing the package stays light).
__all__ = ['engine', 'gate', 'grounded', 'records', 'report', 'rollouts', 'schema', 'sequential', 'stats', 'stored']
