"""Rules for the gateway's own kinds of value: addresses, URLs, paths, header names, secrets.

``rules.py`` has the generic rules (integers, durations, lists); these build
on them for values several schema modules declare. Like every rule, each
converts one raw YAML value or raises ``Invalid`` with what was expected.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

from switchyard.config import rules
from switchyard.config.rules import Invalid, Rule

_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9.-]+):(\d{1,5})")
HEADER_NAME = r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}"
CONTINUATION_PROMPT_MAX_CHARS = 4096


def bind_address(value: Any) -> str:
    text = rules.string()(value)
    m = _HOST_PORT.fullmatch(text)
    if not m or not 0 < int(m.group(2)) < 65536:
        raise Invalid(f"must be HOST:PORT with a port in 1-65535, got {text!r}")
    return text


def shown_url(url: str) -> str:
    """``url`` as an error message may show it: a ``user:password@`` part is masked."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return url
    return f"{scheme}{sep}***@{authority.rsplit('@', 1)[1]}{slash}{path}"


def http_url(value: Any) -> str:
    text = rules.string()(value)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid(f"must be an http:// or https:// URL with a host, got {shown_url(text)!r}")
    if parts.query or parts.fragment:
        raise Invalid("must not carry a query string or fragment")
    return text.rstrip("/")


def metrics_url(value: Any) -> str:
    """An http(s) URL with a host; a query is allowed (some exporters filter by it), a fragment is not."""
    text = rules.string()(value)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid(f"must be an http:// or https:// URL with a host, got {text!r}")
    if parts.fragment:
        raise Invalid("must not carry a fragment")
    return text


def http_path(value: Any) -> str:
    return rules.string(r"/[^\s?#]*", "an absolute path starting with /")(value)


def header_name(value: Any) -> str:
    """An HTTP header name of at most 64 characters, lower-cased."""
    return rules.string(HEADER_NAME, "an HTTP header name")(value).lower()


def header_token(value: Any) -> str:
    """An HTTP header name of any length, lower-cased."""
    return rules.string(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", "an HTTP header name")(value).lower()


def optional_header_name(value: Any) -> str:
    """A header name, or ``""`` for none."""
    if value == "":
        return ""
    return header_name(value)


def cidr(value: Any) -> str:
    text = rules.string()(value)
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise Invalid(f"must be an IP address or CIDR block like 10.0.0.0/8, got {text!r}") from None


def bearer_token(value: Any) -> str:
    # The message never repeats the value: it is a secret.
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {rules.type_name(value)}")
    if len(value) < 16 or len(value) > 512 or any(ch.isspace() for ch in value):
        raise Invalid("must be 16 to 512 characters without spaces (a bearer token); the value is not shown")
    return value


def integer_set(minimum: int, maximum: int) -> Rule[frozenset[int]]:
    items = rules.list_of(rules.integer(minimum, maximum), "integers")
    return lambda value: frozenset(items(value))


HTTP_ERROR_STATUS = integer_set(400, 599)


def continuation_prompt(value: Any) -> str:
    text = rules.string()(value)
    if not text.strip():
        raise Invalid("must not be only whitespace")
    if len(text) > CONTINUATION_PROMPT_MAX_CHARS:
        raise Invalid(f"must be at most {CONTINUATION_PROMPT_MAX_CHARS} characters, got {len(text)}")
    return text


def words(*choices: str) -> Rule[str]:
    """One of ``choices``, kept as the string."""
    return rules.one_of({c: c for c in choices})


def model_name(value: Any) -> str:
    """A model name or glob as ``backends[].models`` lists it."""
    text = rules.string()(value)
    if len(text) > 256 or any(ch.isspace() for ch in text):
        raise Invalid(f"must be a model name or glob without spaces, at most 256 characters, got {text!r}")
    return text


def anthropic_version(value: Any) -> str:
    """An ``anthropic-version`` date, YYYY-MM-DD (YAML reads an unquoted one as a date)."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    if not isinstance(value, str):
        raise Invalid(f"must be a date YYYY-MM-DD such as 2023-06-01, got {rules.type_name(value)}")
    text = rules.string(r"\d{4}-\d{2}-\d{2}", "a date YYYY-MM-DD such as 2023-06-01")(value)
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise Invalid(f"must be a real calendar date YYYY-MM-DD, got {text!r}") from None
    return text


_REPLAY_WORDS = rules.one_of({"enabled": True, "disabled": False})


def replay(value: Any) -> bool:
    """``enabled``/``disabled`` only: YAML reads ``on``/``off``/``yes``/``no`` as booleans, which are refused."""
    if isinstance(value, bool):
        raise Invalid("must be one of enabled, disabled, got boolean")
    return _REPLAY_WORDS(value)


def quoted_url(value: Any) -> str:
    """A refused URL as an error quotes it: anything between ``://`` and ``@`` (credentials) masked."""
    text = repr(value)
    if isinstance(value, str) and "@" in value and "://" in value:
        scheme, _, rest = value.partition("://")
        text = repr(f"{scheme}://***@{rest.rpartition('@')[2]}")
    return text
