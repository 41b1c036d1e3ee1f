"""The transaction proofs' parts: the consume-transform-produce worker process (``worker.py``),
the processes that run it (``workers.py``), and topics, reads and coordinator lookups
(``traffic.py``)."""
