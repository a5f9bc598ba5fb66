"""Recorded rollouts: rosbag2 writing (crash-safe splits) and reading with
rosbags, message types, and (later) replay, aggregation and reports."""
