"""Helpers shared by test modules in several folders (importable as ``support``: pytest's
``pythonpath`` in pyproject.toml puts ``tests/`` on the path, since pytest imports test modules
with importlib)."""
