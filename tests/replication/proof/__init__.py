"""The proof that replication keeps what it acknowledged: a Jepsen-style history checker
(``checker``), a byte-for-byte comparison of every replica's segment files (``replicas``), the
produce/consume workload that fills the history (``workload``). The network namespaces that cut
a broker off are ``support.netns``."""
