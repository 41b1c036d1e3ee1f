"""Pure builders: a custom resource in, the desired Kubernetes objects out (plain dicts).

``spec/`` reads and validates a resource once, against the bounds and defaults of ``crds``, which
holds the custom resource definitions (the one source of truth the chart is rendered from); the
other modules build one kind of object each, and ``desired.desired_objects`` gathers them. Every
name and label is odradek_operator.names's. No I/O.
"""
