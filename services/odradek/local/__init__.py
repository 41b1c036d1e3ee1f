"""Run Odradek's processes on loopback for development and tests."""
