"""The broker fuzz's machinery, kept apart from the test that drives it.

- ``frames``: a request encoded with a map of where each field's bytes are (checked against
  kio's writer), so a case can be mutated field by field;
- ``batches``: record sets, valid (kafka-python's builder, every codec) and broken (lying
  counts with a recomputed CRC, bad checksums, garbage and bombs behind a codec);
- ``strategies``: Hypothesis strategies that build requests for every served API and version
  from kio's schemas, and rounds of them over several connections;
- ``shapes``: rounds of the two shapes that cost a broker most for their size (a huge array of
  tiny elements, many tiny requests pipelined), and which kind each round is;
- ``mutations``: changes to an encoded request at the field level and at the byte level;
- ``session``: one run: rounds played, invariants checked every batch, the evidence kept;
- ``login``: the SASL/SCRAM exchange an authenticated target does before its cases;
- ``traffic``: sends rounds of cases over raw sockets to a broker's listeners and records what
  came back;
- ``invariants``: what must still hold after a batch of cases (processes, memory and open files,
  logs on disk, log end offsets, a real client, the broker's own evidence), and the broker's
  loop lag over a round of ``shapes``.

Test support only; nothing here is imported by the broker.
"""
