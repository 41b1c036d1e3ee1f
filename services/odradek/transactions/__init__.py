"""The transaction coordinator (Kafka's ``transaction-coordinator`` module): a pure core and
an asynchronous facade the broker wires to its replicas (``broker.transaction_coordinator``)
and its handlers call.

Layers, each importing only those below it:

- ``coordinator``: the facade: shards on the coordinators' runtime (``coordinator.runtime``),
  markers handed to the broker's sender once the Prepare records are replicated, timers,
  producer ids awaited before an operation (the only asynchronous module);
- ``shard``: one ``__transaction_state`` partition as state, replayed from its records, and the
  operations (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, completion after the
  markers, timeouts, expiry, Describe/List) returning records and answers;
- ``views``: DescribeTransactions and ListTransactions over a shard's transactions;
- ``result``: what operations return (records, markers to write, answers);
- ``metadata``: ``TransactionMetadata`` and the state machine (``TransactionState``);
- ``records``: Kafka's ``TransactionLogKey`` / ``TransactionLogValue`` formats;
- ``config``: the coordinator's settings, Kafka's defaults.

Nothing here imports the broker, and nothing but ``coordinator`` is asynchronous (import-linter
contracts say so).
"""
