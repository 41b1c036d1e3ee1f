"""The kopf registrations, and nothing else: each handler hands over to ``reconcile``."""
