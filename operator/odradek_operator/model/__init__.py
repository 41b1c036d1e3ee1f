"""Pure builders: a custom resource in, the desired Kubernetes objects out (plain dicts).

``spec`` reads and validates a resource once; ``names`` holds every name and label; the other
modules build one kind of object each, and ``desired.desired_objects`` gathers them; ``crds``
holds the custom resource definitions (the one source of truth the chart is rendered from).
No I/O.
"""
