"""The broker: partitions on this node's log dirs, served over Kafka's wire protocol.

- ``partition`` and ``replica_manager``: the data path's rules (leadership, acks, high watermark,
  long-poll fetch), with no network code.
"""
