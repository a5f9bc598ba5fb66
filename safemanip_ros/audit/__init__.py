"""Recorded rollouts audited: replay of bags and traces into frames,
aggregation, statistics, reports and gating, on local processes or Ray.
Bags are opened through :mod:`safemanip_ros.bag`."""
