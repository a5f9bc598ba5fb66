"""Property suites, ontology and scenes: the data that says *what* to
monitor, turned into property instances (no ROS, no sensors)."""
