"""rclpy adapters: nodes, QoS, parameters and message conversion.

The only layer (with the simulator bridge) that imports rclpy; everything it
computes comes from the pure core packages.
"""
