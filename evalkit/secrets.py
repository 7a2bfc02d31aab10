"""Secrets kept off disk: credentials in URLs, keys and bearer tokens in what a server said, and the values
of the keys evalkit was given.

Three layers, from the most to the least specific:

- `redact_url` / `redact_argv`: a URL evalkit records on purpose (run.json's `base_url` and `argv`, an env
  named by its URL) loses its user and password, and the values of query parameters named like secrets.
- `scrub`: text that came from elsewhere — a provider's error body, an exception's message, a traceback —
  loses anything shaped like a key (`sk-…`, `hf_…`, …), a bearer or basic token, `api_key=…`-like pairs and
  URL credentials, before it reaches a record.
- `scrub_known`: the last guard in every writer of run files (`evalkit.records.rundir`): the exact value of
  each key the environment holds (variables named like `*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`,
  whether set by the shell or loaded from a `.env`), and of each password `remember` was told, is replaced
  wherever it occurs. Model text is never pattern-scrubbed: only a known value is removed from it.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
MIN_SECRET = 8
"""Shorter values are not treated as secrets (`VLLM_API_KEY=none` would otherwise mask every "none")."""

_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY)(?:_|$)", re.I
)
_SECRET_PARAM = re.compile(r"(?:api[_-]?key|key|token|secret|password|passwd|sig|signature|auth)", re.I)
_USERINFO = re.compile(r"(?<=://)[^\s/?#@\"'<>]+@")
_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-)?[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_.-]{10,})"
)
_SCHEME_TOKEN = re.compile(r"\b(Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=-]{6,}", re.I)
_PAIR = re.compile(
    r"""(?ix)
    ((?:x-)?(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret|password|passwd|authorization)
     ["']?\s*[:=]\s*["']?)
    (?!\*\*\*|(?:Bearer|Basic|Token)\s)([^\s"',;&}\]]{6,})
    """
)

_remembered: set[str] = set()
_lock = threading.Lock()


def remember(value: str | None) -> None:
    """Treat `value` as a secret from now on in this process (a password given inside a URL)."""
    if value and len(value) >= MIN_SECRET:
        with _lock:
            _remembered.add(value)


def known() -> list[str]:
    """Every value to mask, longest first (so a key that contains another is masked whole)."""
    found = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET}
    for v in os.environ.values():  # a password inside a URL an env variable holds (VLLM_BASE_URL, …)
        if "://" in v and "@" in v:
            password = _url_password(v)
            if password:
                found.add(password)
    with _lock:
        found |= _remembered
    return sorted(found, key=len, reverse=True)


def _url_password(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        pw = parts.password
    except ValueError:
        return None
    return pw if pw and len(pw) >= MIN_SECRET else None


def scrub_known(text: str) -> str:
    """`text` with the value of every known secret masked."""
    for value in known():
        if value in text:
            text = text.replace(value, MASK)
    return text


def redact_url(url: str) -> str:
    """`url` without its user and password, and with the values of secret-named query parameters masked;
    anything that is not a URL is returned as it is."""
    if not isinstance(url, str) or "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.sub(MASK + "@", url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_PARAM.search(k) for k, _ in pairs):
            query = urlencode([(k, MASK if _SECRET_PARAM.search(k) else v) for k, v in pairs], safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_argv(argv: list[str] | None) -> list[str] | None:
    """A command line as run.json keeps it: URLs without credentials, known secrets masked."""
    if argv is None:
        return None
    out = []
    for arg in argv:
        if "=" in arg and arg.startswith("--"):
            flag, _, value = arg.partition("=")
            arg = f"{flag}={redact_url(value)}"
        else:
            arg = redact_url(arg)
        out.append(scrub_known(arg))
    return out


def scrub(text: str | None) -> str | None:
    """Text from elsewhere (an error body, an exception message, a traceback) without anything that looks
    like a credential: URL user and password, key-shaped strings, bearer/basic tokens, `key=value` pairs
    named like secrets, and every known secret."""
    if not text:
        return text
    text = scrub_known(text)
    text = _USERINFO.sub(MASK + "@", text)
    text = _SHAPES.sub(MASK, text)
    text = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _PAIR.sub(lambda m: m.group(1) + MASK, text)


def redact_json(value: Any) -> Any:
    """A JSON value with `redact_url` applied to every string in it that holds a URL."""
    if isinstance(value, str):
        return redact_url(value) if "://" in value else value
    if isinstance(value, dict):
        return {k: redact_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(v) for v in value]
    return value
