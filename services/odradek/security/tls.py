"""The ``ssl.SSLContext`` of an SSL listener, built from its ``SslSettings``, and the principal
of a TLS connection.

``server_context`` reads the PEM key store and trust store (files or inline, Kafka's
``DefaultSslEngineFactory`` with KIP-651's PEM stores) once, at start: an unreadable file, a key
that does not decrypt with ``ssl.key.password`` or does not match its certificate, or a trust
store with no certificate is an ``InvalidConfigError`` naming the key and the listener, and the
broker does not start. ``ssl.client.auth`` is ``CERT_NONE`` / ``CERT_OPTIONAL`` (requested: a
certificate sent is verified) / ``CERT_REQUIRED`` (a client without one fails the handshake).
``ssl.enabled.protocols`` bounds the versions; nothing below TLS 1.2 is ever accepted.

Python's ``ssl`` loads a key only from a file, so inline PEM is written for the moment of loading
to a file only this user can read, in a directory of its own, and removed at once.

``client_context`` is the other end, for the links between Odradek's own processes (a broker to
another broker's inter-broker listener or to the controller, the controller to a broker's
control-plane listener): the listener's key store is the certificate it presents, its trust
store what it verifies the peer's certificate and host name against (Kafka's
``ssl.endpoint.identification.algorithm=https``, its default, always); without a trust store the
system's certificate authorities are trusted.

Both ends reload their certificates without a restart (Kafka's dynamic key store update):
``ListenerTls`` for a listener, ``ClientTls`` for a link's client side, each checked every
``CERTIFICATE_CHECK_INTERVAL_S`` by ``reload_certificates`` (the broker's and the controller's).

``peer_principal``: ``User:ANONYMOUS`` without a client certificate, else ``User:`` and the
certificate's subject in RFC 2253 (Java's ``X500Principal.getName()``) mapped by
``ssl.principal.mapping.rules``. Any thread (the context is built before serving).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509

from odradek.config.broker import BrokerConfig
from odradek.config.endpoints import TLS_SECURITY_PROTOCOLS, SecurityProtocol
from odradek.config.ssl import SslSettings
from odradek.errors import InvalidConfigError
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.security.principal_mapping import PrincipalMapper

log = logging.getLogger(__name__)

__all__ = [
    "CERTIFICATE_CHECK_INTERVAL_S",
    "BrokerLinksTls",
    "ClientTls",
    "ListenerTls",
    "broker_links_tls",
    "client_context",
    "distinguished_name",
    "listener_tls",
    "peer_principal",
    "reload_certificates",
    "server_context",
]

CERTIFICATE_CHECK_INTERVAL_S = 5.0

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def _normalised_pem(text: str) -> str:
    """PEM blocks re-wrapped at 64 columns: Kafka accepts a block on one line (a properties
    value), OpenSSL does not."""
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        data = "".join(body.split())
        lines = [data[i : i + 64] for i in range(0, len(data), 64)]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    return "\n".join(blocks) + "\n"


def _read(settings: SslSettings, key: str, path: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidConfigError(f"{key}={path} (listener {settings.listener}): {e}") from e


def _load_keystore(context: ssl.SSLContext, settings: SslSettings) -> None:
    if settings.keystore_location is not None:
        what = f"ssl.keystore.location={settings.keystore_location}"
        pem = _read(settings, "ssl.keystore.location", settings.keystore_location)
    else:
        what = "ssl.keystore.key/ssl.keystore.certificate.chain"
        pem = f"{settings.keystore_key}\n{settings.keystore_certificate_chain}"
    pem = _normalised_pem(pem)
    with tempfile.TemporaryDirectory(prefix="odradek-tls-") as private:  # mode 0700
        path = Path(private) / "keystore.pem"
        path.touch(mode=0o600)
        path.write_text(pem)
        try:
            context.load_cert_chain(path, password=settings.key_password or "")
        except ssl.SSLError as e:
            raise InvalidConfigError(
                f"{what} (listener {settings.listener}): cannot load the private key and its "
                f"certificate chain ({e.reason or e}); the file must hold a PEM private key "
                f"(encrypted: with ssl.key.password) and the certificate it belongs to"
            ) from e


def _load_truststore(context: ssl.SSLContext, settings: SslSettings) -> None:
    if settings.truststore_location is not None:
        what = f"ssl.truststore.location={settings.truststore_location}"
        pem = _read(settings, "ssl.truststore.location", settings.truststore_location)
    elif settings.truststore_certificates is not None:
        what = "ssl.truststore.certificates"
        pem = settings.truststore_certificates
    else:
        return
    pem = _normalised_pem(pem)
    if "CERTIFICATE" not in pem:
        raise InvalidConfigError(f"{what} (listener {settings.listener}): no PEM certificate")
    try:
        context.load_verify_locations(cadata=pem)
    except ssl.SSLError as e:
        raise InvalidConfigError(
            f"{what} (listener {settings.listener}): cannot load the certificates ({e})"
        ) from e


def _context(settings: SslSettings, protocol: int) -> ssl.SSLContext:
    """A context of ``protocol`` (``ssl.PROTOCOL_TLS_SERVER`` or ``_CLIENT``) with the
    settings' versions and key store, the settings checked first."""
    settings.check()
    context = ssl.SSLContext(protocol)
    versions = [_VERSIONS[p] for p in settings.enabled_protocols]
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)
    _load_keystore(context, settings)
    return context


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """The listener's TLS context (see the module); raises ``InvalidConfigError``."""
    context = _context(settings, ssl.PROTOCOL_TLS_SERVER)
    _load_truststore(context, settings)
    context.verify_mode = _CLIENT_AUTH[settings.client_auth]
    return context


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """The context an internal link opens a connection to ``settings.listener``'s peers with
    (see the module); raises ``InvalidConfigError``."""
    context = _context(settings, ssl.PROTOCOL_TLS_CLIENT)  # checks certificates and host names
    if settings.trusted() is None:
        context.load_default_certs()
    else:
        _load_truststore(context, settings)
    return context


def distinguished_name(certificate_der: bytes) -> str:
    """The subject of a DER certificate in RFC 2253 form, as Java's ``X500Principal.getName()``."""
    return x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()


def peer_principal(
    ssl_object: ssl.SSLObject | ssl.SSLSocket, mapper: PrincipalMapper
) -> KafkaPrincipal:
    """The principal of a TLS connection whose handshake is done; raises ``NoMatchingRule``."""
    certificate = ssl_object.getpeercert(binary_form=True)
    if not certificate:
        return ANONYMOUS
    return KafkaPrincipal.user(mapper.name(distinguished_name(certificate)))


class ListenerTls:
    """What an SSL listener's server needs: its context and its principal mapper.

    Certificates reload without a restart (Kafka's dynamic key store update): ``reload``
    rebuilds the context from the listener's settings when the key store's or trust store's
    file changed (its modification time or size), and every handshake from then on uses the new
    one: the serving ``context`` hands each new connection the latest context in its SNI
    callback (Python's documented way to switch an ``SSLObject``'s context before the
    handshake goes on). Connections already open keep theirs. A file that no longer loads (a
    half-written key, a key that does not match) keeps the previous context and is logged, as
    Kafka refuses such an update. On the event loop, like the server.
    """

    def __init__(self, listener: str, settings: SslSettings | None, context: ssl.SSLContext,
                 mapper: PrincipalMapper):  # fmt: skip
        self.listener = listener
        self.settings = settings
        self.context = context
        self.mapper = mapper
        self.reloads = 0  # contexts built after the first (tests and logs read it)
        self._current = context
        self._files = _store_files(settings)
        context.sni_callback = self._latest

    @classmethod
    def of(cls, settings: SslSettings) -> ListenerTls:
        """Built at start; raises ``InvalidConfigError`` (see ``server_context``)."""
        mapper = PrincipalMapper.from_rules(settings.principal_mapping_rules)
        return cls(settings.listener, settings, server_context(settings), mapper)

    def _latest(self, ssl_object: ssl.SSLObject, _server_name: str | None, _ctx: object) -> None:
        if self._current is not self.context:
            ssl_object.context = self._current

    def reload(self) -> bool:
        """Rebuild the context if the store files changed; True if a new one now serves."""
        files = _store_files(self.settings)
        if files == self._files or self.settings is None:
            return False
        self._files = files
        try:
            context = server_context(self.settings)
        except InvalidConfigError as e:
            log.error("listener %s: keeping its certificates, the new ones do not load: %s",
                      self.listener, e)  # fmt: skip
            return False
        self._current = context
        self.reloads += 1
        log.info("listener %s: certificates reloaded from %s", self.listener,
                 ", ".join(path for path, _, _ in files))  # fmt: skip
        return True


def _store_files(settings: SslSettings | None) -> tuple[tuple[str, int, int], ...]:
    """(path, modification time, size) of the listener's key and trust store files."""
    if settings is None:
        return ()
    found = []
    for path in (settings.keystore_location, settings.truststore_location):
        if path is None:
            continue
        try:
            stat = os.stat(path)
        except OSError:
            found.append((path, -1, -1))
        else:
            found.append((path, stat.st_mtime_ns, stat.st_size))
    return tuple(found)


class ClientTls:
    """The client side of a link between Odradek's processes (``client_context``), whose
    certificates reload without a restart.

    ``context`` is one object for the process's life (connections are opened with it from
    wherever it was handed); ``reload`` loads the key store into it again when its file
    changed, so every handshake from then on presents the new certificate, and adds the trust
    store's certificates (OpenSSL can add trusted certificates to a context, not take them
    away: a certificate authority that is no longer trusted stays trusted by the links until
    the process restarts). A file that no longer loads keeps what was there, and is logged.
    On the event loop.
    """

    def __init__(self, settings: SslSettings):
        self.settings = settings
        self.context = client_context(settings)
        self.reloads = 0
        self._files = _store_files(settings)

    def reload(self) -> bool:
        """Load the store files again if they changed; True if they now serve."""
        files = _store_files(self.settings)
        if files == self._files:
            return False
        self._files = files
        try:
            _load_keystore(self.context, self.settings)
            if self.settings.trusted() is not None:
                _load_truststore(self.context, self.settings)
        except InvalidConfigError as e:
            log.error("links of listener %s: keeping their certificates, the new ones do not "
                      "load: %s", self.settings.listener, e)  # fmt: skip
            return False
        self.reloads += 1
        log.info("links of listener %s: certificates reloaded from %s", self.settings.listener,
                 ", ".join(path for path, _, _ in files))  # fmt: skip
        return True


class _Reloadable(Protocol):
    def reload(self) -> bool: ...


async def reload_certificates(
    stopped: asyncio.Event,
    reloadable: Iterable[_Reloadable],
    interval_s: float = CERTIFICATE_CHECK_INTERVAL_S,
) -> None:
    """Every ``interval_s``, each listener's and link's certificates are taken again if their
    files changed (``ListenerTls.reload``, ``ClientTls.reload``), until ``stopped`` is set."""
    reloadable = tuple(reloadable)
    while not stopped.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopped.wait(), interval_s)
        for tls in reloadable:
            tls.reload()


@dataclass(frozen=True, slots=True)
class BrokerLinksTls:
    """The TLS a broker's own connections use; None where the peer's listener is PLAINTEXT.

    ``brokers``: to another broker's inter-broker listener (replica fetches, transaction
    markers), with the inter-broker listener's settings, as Kafka's inter-broker clients;
    ``controller``: to the controller's listener (AlterPartition, ControlledShutdown, forwarded
    requests), with the control-plane listener's settings: the controller speaks what the
    brokers' control plane speaks.
    """

    brokers: ClientTls | None = None
    controller: ClientTls | None = None

    @property
    def brokers_context(self) -> ssl.SSLContext | None:
        return None if self.brokers is None else self.brokers.context

    @property
    def controller_context(self) -> ssl.SSLContext | None:
        return None if self.controller is None else self.controller.context

    def reloadable(self) -> tuple[ClientTls, ...]:
        return tuple(tls for tls in (self.brokers, self.controller) if tls is not None)


def broker_links_tls(config: BrokerConfig) -> BrokerLinksTls:
    """Built at start; raises ``InvalidConfigError`` (see ``client_context``)."""

    def of(listener: str) -> ClientTls | None:
        if config.security_protocol(listener) is not SecurityProtocol.SSL:
            return None
        return ClientTls(config.ssl_settings(listener))

    return BrokerLinksTls(
        brokers=of(config.effective_inter_broker_listener_name),
        controller=of(config.control_plane_listener_name),
    )


def listener_tls(config: BrokerConfig) -> dict[str, ListenerTls]:
    """A ``ListenerTls`` per SSL and SASL_SSL listener; raises ``InvalidConfigError``."""
    return {
        listener.name: ListenerTls.of(config.ssl_settings(listener.name))
        for listener in config.listener_table
        if listener.security_protocol in TLS_SECURITY_PROTOCOLS
    }
