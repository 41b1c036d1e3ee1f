"""The Kafka wire protocol, without I/O: bytes in, messages out, and back.

kio supplies the messages: one frozen dataclass per API, version and direction, generated from
Kafka's JSON schemas, and the error codes. This package reads and writes them (see
``docs/protocol.md`` for why not with kio's own serializers) and frames them. Modules, each
importing only those listed after it:

- ``codec``: whole requests and responses (header + body); the entry points for the server.
- ``apis``: the API/version table the broker serves; ApiVersions answers and the KIP-511 fallback.
- ``framing``: the 4-byte size prefix; an incremental ``FrameDecoder``.
- ``header``: request headers v1/v2 and response headers v0/v1.
- ``reader`` / ``writer``: bodies from and to bytes, driven by the schemas.
- ``fields``: a schema dataclass's wire layout; ``schemas``: which dataclass and header version an
  (api key, version) uses; ``parts``: messages as buffers and file regions (for ``sendfile``).
- ``errors``: ``InvalidRequestError``, ``UnsupportedVersionError``, ... in ``odradek.errors``' tree.

Nothing here opens a socket, starts a thread or touches the log.
"""
