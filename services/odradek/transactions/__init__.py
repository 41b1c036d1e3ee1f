"""The transaction coordinator's pure core (Kafka's ``transaction-coordinator`` module), as
groundwork for issue 10: no handler calls it yet, and the broker still refuses transactional
producers until the whole path (markers, the last stable offset, aborted-transaction indexes)
exists.

Layers, each importing only those below it:

- ``shard``: one ``__transaction_state`` partition as state, replayed from its records, and the
  operations (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, completion after the
  markers, timeouts, expiry, Describe/List) returning records and answers;
- ``views``: DescribeTransactions and ListTransactions over a shard's transactions;
- ``result``: what operations return (records, markers to write, answers);
- ``metadata``: ``TransactionMetadata`` and the state machine (``TransactionState``);
- ``records``: Kafka's ``TransactionLogKey`` / ``TransactionLogValue`` formats;
- ``config``: the coordinator's settings, Kafka's defaults.

Nothing here imports the broker (an import-linter contract says so).
"""
