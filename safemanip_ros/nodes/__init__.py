"""rclpy adapters: nodes, QoS, parameters and message conversion.

The only layer (with the simulator bridge) that imports rclpy; everything it
computes comes from the pure core packages.
"""

# The package's modules (each imported where it is used: importing the package stays light).
__all__ = ['alert_reporting', 'bag_player', 'cdr', 'controllers', 'conversions', 'event_wire', 'executor_ledger', 'gate_node', 'grounding_nodes', 'guard', 'metrics_wire', 'monitor_node', 'neighbours', 'params', 'predicate_wire', 'qos', 'recorder_node', 'recorder_process', 'robot_standin', 'runner', 'sim_bridge', 'supervisor_node', 'trace_player', 'verdict_wire']
