"""The package version (one place; ``mmvref.__version__`` and ``show_config`` read it)."""
__version__ = "0.1.0"
