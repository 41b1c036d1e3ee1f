"""Subcommands of the ``odradek`` CLI, one module each (see ``odradek.cli``)."""
