"""Test-only, loaded by the brokers of tests/integration/transactions (on their PYTHONPATH):
a producer's transactional data batch is accepted as the transaction coordinator's would be.

Until the transaction coordinator exists, the validator refuses a client's transactional batch
(INVALID_TXN_STATE); these tests need transactions in partitions for markers to end. Control
batches from clients stay refused. Once the refusal is gone this changes nothing.
"""

from odradek.storage import validator

_check_batches = getattr(validator, "_check_batches", None)

if _check_batches is not None:

    def _accepting_transactions(batches, total_bytes, config, origin):
        if origin == validator.AppendOrigin.CLIENT and not any(h.is_control for _, h in batches):
            origin = validator.AppendOrigin.COORDINATOR
        return _check_batches(batches, total_bytes, config, origin)

    validator._check_batches = _accepting_transactions
