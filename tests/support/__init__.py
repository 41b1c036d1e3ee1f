"""Helpers shared by test modules in several folders (importable as ``support``: the root
``conftest`` puts ``tests/`` on the path, since pytest imports test modules with importlib)."""
