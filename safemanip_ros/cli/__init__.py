"""The ``safemanip`` command: one entry point, one module per subcommand."""
