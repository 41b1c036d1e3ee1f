"""Odradek: a distributed, partitioned, replicated commit log that speaks Kafka's protocol."""

__version__ = "0.1.0"
