"""A cluster's pure rules, shared by the controller (which decides), the broker (which validates
and forwards admin requests) and the cluster operations (``odradek.ops``), so none of them imports
another for them:

- ``placement``: where a partition's replicas live and which replica leads (Kafka's
  ``AdminUtils`` placement and ``PartitionLeaderElectionAlgorithms``);
- ``election``: what a leader election is asked and answers (election type, outcomes);
- ``elect_leaders``: ElectLeaders on the wire, read and written by both the broker that forwards
  it and the controller that decides it.

No I/O and no shared state (``elect_leaders`` only yields to the event loop between time slices);
imports none of the broker, the controller, the ops, storage or ZooKeeper.
"""
