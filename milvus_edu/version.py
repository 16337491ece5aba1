"""The package's version, in a module of its own so that any layer can name it (a run token and a run's
summary record it) without importing the package's front door. ``pyproject.toml`` reads it from here."""

__version__ = "0.1.0"
