"""Property suites, ontology and scenes: the data that says *what* to
monitor, turned into property instances (no ROS, no sensors)."""

# The package's modules (each imported where it is used: importing the package stays light).
__all__ = ['expressions', 'fields', 'ontology', 'suite', 'yamlio']
