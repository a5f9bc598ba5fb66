"""Simulation side: scripted rollouts and fault injection (pure Python), and
later the robosuite/MuJoCo bridge (the only part that may need rclpy)."""
