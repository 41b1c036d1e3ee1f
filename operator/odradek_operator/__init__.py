"""Odradek's Kubernetes operator (kopf), in layers that import only downwards (the layers
contract in pyproject.toml):

- ``__main__``: the command (``python -m odradek_operator``), which starts kopf;
- ``handlers.py``: only the kopf registrations;
- ``reconcile/``: applies the desired objects and runs the ordered operations (rolling restarts,
  scaling, topics, users, certificates, Connect);
- ``model/``: pure builders from a custom resource to the desired objects, beside ``kube.py``
  (the port to the Kubernetes API), ``metrics.py`` and ``logs.py``;
- ``pki/``: the certificates as values;
- ``names.py``: every name, label and annotation the operator gives an object.

See docs/kubernetes.md.
"""
