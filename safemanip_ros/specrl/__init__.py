"""SpecRLBench: its specification families, metrics and evaluator (no Gymnasium needed)."""

# The package's modules (each imported where it is used: importing the package stays light).
__all__ = ['evaluate', 'families', 'metrics', 'traces']
