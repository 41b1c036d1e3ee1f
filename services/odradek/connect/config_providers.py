"""Kafka's config providers in a worker's own properties (KIP-297, KIP-421, KIP-887).

A worker file names its providers and then refers to values they hold, so that a secret (a SASL
password) need not be written in the file itself:

```properties
config.providers=env
config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
sasl.jaas.config=...ScramLoginModule required username="connect" password="${env:CONNECT_PASSWORD}";
```

A variable is ``${provider:[path:]key}`` (Kafka's ``ConfigTransformer`` pattern); the providers,
by Kafka's class names (``PROVIDER_CLASSES``):

- ``EnvVarConfigProvider``: ``${env:NAME}`` is the environment variable ``NAME`` (no path);
  ``config.providers.<p>.param.allowlist.pattern`` (a regular expression, whole names) limits
  which variables it gives;
- ``FileConfigProvider``: ``${file:/path/to/file.properties:key}``, a key of a properties file;
- ``DirectoryConfigProvider``: ``${dir:/path/to/dir:name}``, the content of the file ``name``
  in that directory (a mounted Kubernetes Secret has one file per key).

Where Odradek differs: a variable that names no value (an unset environment variable, a missing
key or file) is refused with a ``ConfigException`` naming the key that holds it, where Kafka
leaves the ``${...}`` text in place (and a worker then fails later, say with a wrong password).
Only the worker's own properties are resolved (KIP-421); a connector's config is taken as it is
written. Other provider classes and parameters are refused by name. No message holds a resolved
value.

``resolve(props, environ)`` is pure apart from the files the ``file`` and ``dir`` providers
read; any thread may call it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from odradek.config.properties import PROPERTIES_FILE_MAX_BYTES, parse_properties
from odradek.connect.api import ConfigException
from odradek.errors import InvalidConfigError

__all__ = ["CONFIG_PROVIDERS", "PROVIDER_CLASSES", "is_provider_key", "resolve"]

CONFIG_PROVIDERS = "config.providers"
_PREFIX = CONFIG_PROVIDERS + "."
ENV = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
PROVIDER_CLASSES = (ENV, FILE, DIRECTORY)
# Parameters (config.providers.<p>.param.<name>) each class takes.
_PARAMS = {ENV: ("allowlist.pattern",), FILE: (), DIRECTORY: ()}
# Kafka's ConfigTransformer.DEFAULT_PATTERN.
_VARIABLE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
VALUE_FILE_MAX_BYTES = PROPERTIES_FILE_MAX_BYTES

Lookup = Callable[[str, str], "str | None"]  # (path, key) -> value, None when there is none


def is_provider_key(name: str) -> bool:
    return name == CONFIG_PROVIDERS or name.startswith(_PREFIX)


def _env_lookup(environ: Mapping[str, str], params: Mapping[str, str], where: str) -> Lookup:
    raw = params.get("allowlist.pattern")
    try:
        allowed = re.compile(raw) if raw is not None else None
    except re.error as e:
        raise ConfigException(f"{where}.param.allowlist.pattern", f"not a pattern: {e}") from e

    def lookup(path: str, key: str) -> str | None:
        if path:
            raise ConfigException(
                where, f"path is not supported for environment variables: {path!r}"
            )
        if allowed is not None and not allowed.fullmatch(key):
            return None
        return environ.get(key)

    return lookup


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > VALUE_FILE_MAX_BYTES:
            return None
        return path.read_text("utf-8")
    except OSError:
        return None


def _file_lookup(path: str, key: str) -> str | None:
    text = _read(Path(path))
    if text is None:
        return None
    try:
        props = {p.key: p.value for p in parse_properties(text, source=path)}
    except InvalidConfigError:
        return None
    return props.get(key)


def _directory_lookup(path: str, key: str) -> str | None:
    if not path or "/" in key or key in ("", ".", ".."):
        return None
    return _read(Path(path) / key)


def _providers(props: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, Lookup]:
    names = [n.strip() for n in props.get(CONFIG_PROVIDERS, "").split(",") if n.strip()]
    lookups: dict[str, Lookup] = {}
    for name in names:
        where = f"{_PREFIX}{name}"
        cls = props.get(f"{where}.class", "").strip()
        if not cls:
            raise ConfigException(f"{where}.class", "required for each of config.providers")
        if cls not in PROVIDER_CLASSES:
            raise ConfigException(
                f"{where}.class", f"{cls!r} is not one of {', '.join(PROVIDER_CLASSES)}"
            )
        params = {
            k[len(f"{where}.param.") :]: v
            for k, v in props.items()
            if k.startswith(f"{where}.param.")
        }
        for param in params:
            if param not in _PARAMS[cls]:
                raise ConfigException(f"{where}.param.{param}", f"not a parameter of {cls}")
        if cls == ENV:
            lookups[name] = _env_lookup(environ, params, where)
        else:
            lookups[name] = _file_lookup if cls == FILE else _directory_lookup
    for key in props:
        if key.startswith(_PREFIX):
            provider = key[len(_PREFIX) :].split(".", 1)[0]
            if provider not in lookups:
                raise ConfigException(key, f"provider {provider!r} is not in config.providers")
            rest = key[len(f"{_PREFIX}{provider}") :]
            if rest != ".class" and not rest.startswith(".param."):
                raise ConfigException(key, "unknown config provider key")
    return lookups


def resolve(props: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``props`` with every ``${provider:[path:]key}`` of a declared provider replaced (module
    docstring); unchanged when no provider is declared. ``environ``: ``os.environ`` if None."""
    lookups = _providers(props, os.environ if environ is None else environ)
    if not lookups:
        return dict(props)
    out: dict[str, str] = {}
    for name, value in props.items():
        if is_provider_key(name):
            out[name] = value
            continue

        def substitute(match: re.Match[str], name: str = name) -> str:
            provider, path, key = match.group(1), match.group(3) or "", match.group(4)
            lookup = lookups.get(provider)
            if lookup is None:
                return match.group(0)  # not a declared provider: left as written, as Kafka
            found = lookup(path, key)
            if found is None:
                raise ConfigException(name, f"${{{provider}:...}} names no value: {key!r}")
            return found

        out[name] = _VARIABLE.sub(substitute, value)
    return out
