"""Reconcilers: each module one job, plain async functions over the ``Kube`` port and a
``ClusterAdmin`` (see admin.py), unit-tested with fakes."""
