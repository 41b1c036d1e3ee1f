"""The operator's model: pure functions from a custom resource to the desired Kubernetes objects.

Nothing here talks to the API server. ``crds`` holds the custom resource definitions (the one
source of truth the chart is rendered from).
"""
