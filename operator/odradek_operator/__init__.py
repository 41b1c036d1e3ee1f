"""Odradek's Kubernetes operator (kopf).

``model/`` builds the desired Kubernetes objects from a custom resource with pure functions;
``reconcile/`` applies them and runs the ordered operations (rolling restarts, scaling, topics);
``handlers.py`` holds only the kopf registrations. See docs/kubernetes.md.
"""
