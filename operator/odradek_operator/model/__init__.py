"""Pure builders: a custom resource in, the desired Kubernetes objects out (plain dicts).

``spec`` reads and validates a resource once; ``names`` holds every name and label; the other
modules build one kind of object each, and ``desired.desired_objects`` gathers them. No I/O.
"""
