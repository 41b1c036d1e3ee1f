"""The admin APIs' rules: topics, partitions and configurations in ZooKeeper, and producer ids.

In Kafka's ZooKeeper mode the broker that receives an admin request validates it and writes the
result to ZooKeeper; the controller watches those znodes and makes the change live (leaders for
new partitions, replicas stopped for a deleted topic). Odradek does the same, so any broker
answers CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs, and an answer means "written", not "live": clients retry Metadata.

- ``errors``: the admin errors (each carries its Kafka error code) and ``error_of``.
- ``validation``: pure rules for names, partition counts, assignments and config overrides.
- ``topics``: ``TopicAdmin`` (create and delete topics, add partitions) over ZooKeeper.
- ``config_entries``: pure DescribeConfigs rows (value, source, synonyms) for topics and brokers.
- ``configs``: ``ConfigAdmin`` (describe, alter, incrementally alter) over ZooKeeper.
- ``records``: DeleteRecords on the partitions this broker leads.
- ``producer_ids``: ``ProducerIdManager``, blocks of producer ids reserved in ZooKeeper.
- ``leader_election``: ElectLeaders, forwarded to the controller (which alone elects).

Every operation answers per item (topic, resource, partition) with a Kafka error code and a
message; nothing here raises into a request handler. All of it runs on the broker's event loop.
"""
