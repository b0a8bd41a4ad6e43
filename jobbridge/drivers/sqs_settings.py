"""An sqs connection's settings: the keys it accepts, the ones it refuses, and their resolved form.

`SCHEMA` is the one declaration of them: the boot-time checks (`jobbridge.settings`)
and `parse_settings` both read it, and this module imports no client library at
import, so a configuration is checked the same way whether or not boto3 is installed.

``queue_url`` is the whole URL of the connection's ``default`` queue. The form
``sqs://<account>/<queue-name>`` is short for the same queue at ``endpoint``
(or at ``https://sqs.<region>.amazonaws.com``). What is not written is derived,
never guessed silently: the region from an AWS queue URL's host (else boto3's
default), the endpoint from a non-AWS queue URL's scheme and host, the
visibility timeout from the connection's ``reservation`` (rounded up to whole
seconds), the credentials from boto3's own chain. ``wait_time`` is the longest
one receive long-polls (0 turns long polling off).

Nothing waits forever: ``connect_timeout`` (5 s unless written) bounds opening a
connection, ``read_timeout`` (5 s) the wait for SQS's answer, and
``max_attempts`` (2) the tries botocore makes of one call, so a call to an
endpoint that does not answer fails after ``max_attempts`` times ``read_timeout``
(10 s) and a little backoff. A long-polling receive waits its ``wait_time``
besides: that is the worker waiting for work, not an unanswered call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from jobbridge.errors import ConfigurationError, RefusedSetting
from jobbridge.redaction import quoted
from jobbridge.setting_schema import DriverSchema, Field, Refusal, check_keys, describe, within

MAX_VISIBILITY = 43200
MAX_WAIT = 20
#: seconds to connect and to wait for an answer, and the tries of one call, unless written
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 5.0
DEFAULT_MAX_ATTEMPTS = 2

_WHOLE_URL = Refusal("it composes an SQS queue URL out of parts, and an sqs connection is given the whole URL",
                     "queue_url, the whole URL")
_VISIBILITY = Refusal("on sqs the reservation is the visibility timeout, the SQS setting it maps to one to one",
                      "visibility_timeout (whole seconds)")
NO_SECRET = Refusal(
    "a key and a secret sign requests together; with only one, boto3 quietly falls back to whatever "
    "credentials the machine has", "both key and secret, or neither (boto3's own credential chain)")
_NO_REGION = Refusal(
    "credentials with no region send requests to whatever region the machine defaults to",
    "region, the queue's own")


def _combination(options: Mapping[str, Any]) -> tuple[str, Refusal] | None:
    """Credentials that are half there, or sent to no region in particular."""
    for key, other in (("key", "secret"), ("secret", "key")):
        if key in options and other not in options:
            return key, NO_SECRET
    if "key" in options and "region" not in options:
        return "key", _NO_REGION
    return None


SCHEMA = DriverSchema(
    fields={
        "queue_url": Field("url", schemes=("https", "http", "sqs")),
        "region": Field("str"),
        "endpoint": Field("url", schemes=("https", "http")),
        "visibility_timeout": Field("int", least=1, most=MAX_VISIBILITY, default=60),
        "wait_time": Field("int", least=0, most=MAX_WAIT, default=MAX_WAIT),
        "key": Field("str", secret=True),
        "secret": Field("str", secret=True),
        "connect_timeout": Field("float", above=0, default=DEFAULT_CONNECT_TIMEOUT),
        "read_timeout": Field("float", above=0, default=DEFAULT_READ_TIMEOUT),
        "max_attempts": Field("int", least=1, default=DEFAULT_MAX_ATTEMPTS),
    },
    refused={
        "prefix": _WHOLE_URL,
        "suffix": _WHOLE_URL,
        "url": Refusal("an sqs connection is given its queue's URL, not a server's",
                       "queue_url (and endpoint for an SQS-compatible server)"),
        "reservation": _VISIBILITY,
        "retry_after": _VISIBILITY,
    },
    required="queue_url",
    reservation_key="visibility_timeout",
    store_keys=("queue_url",),
    combination=_combination,
)
SETTINGS = SCHEMA.keys
REFUSED = SCHEMA.refused

#: SQS queue names: letters, digits, hyphens and underscores, at most 80 characters
QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
_AWS_HOST = re.compile(r"(?:sqs\.(?P<a>[a-z0-9-]+)|(?P<b>[a-z0-9-]+)\.queue)\.amazonaws\.com(?:\.cn)?")


@dataclass(frozen=True, slots=True)
class SqsSettings:
    """One sqs connection, resolved: the default queue's URL and name, where to send, how long to hide."""

    queue_url: str
    base: str
    region: str
    endpoint: str | None = None
    visibility_timeout: int = SCHEMA.default("visibility_timeout")
    wait_time: int = SCHEMA.default("wait_time")
    key: str | None = None
    secret: str | None = None
    connect_timeout: float = SCHEMA.default("connect_timeout")
    read_timeout: float = SCHEMA.default("read_timeout")
    max_attempts: int = SCHEMA.default("max_attempts")


def parse_settings(settings: Mapping[str, Any]) -> SqsSettings:
    """Validate and resolve a connection's options; a refused or unknown key is a boot failure naming it."""
    check_keys(SCHEMA, settings, "an sqs connection")
    url = _text(settings, "queue_url")
    if url is None:
        raise ConfigurationError("an sqs connection needs queue_url, the whole URL of its queue")
    endpoint = _text(settings, "endpoint")
    key, secret = _text(settings, "key"), _text(settings, "secret")
    if (key is None) != (secret is None):
        raise RefusedSetting("key" if secret is None else "secret", NO_SECRET.why, NO_SECRET.instead,
                             where="an sqs connection")
    region = _text(settings, "region") or _region_of(url)
    if url.lower().startswith("sqs://"):
        url = _expanded(url, endpoint, region)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(f"queue_url must be https://host/<account>/<name> or sqs://<account>/<name>, "
                                 f"not {quoted(url)}")
    return SqsSettings(
        queue_url=url, base=_base_name(url), region=region,
        endpoint=endpoint or (None if _AWS_HOST.fullmatch(parts.hostname or "") else f"{parts.scheme}://{parts.netloc}"),
        visibility_timeout=_visibility(settings), wait_time=_whole(settings, "wait_time"),
        key=key, secret=secret, connect_timeout=_seconds(settings, "connect_timeout"),
        read_timeout=_seconds(settings, "read_timeout"), max_attempts=_attempts(settings))


def _text(settings: Mapping[str, Any], key: str) -> str | None:
    value = settings.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{key} on an sqs connection must be a non-empty string, not {quoted(value, key)}")
    return value.strip()


def _whole(settings: Mapping[str, Any], key: str) -> int:
    """Whole seconds within the key's declared bounds; its default when not written."""
    field = SCHEMA.fields[key]
    value, least, most = settings.get(key, field.default), field.least or 0, field.most or math.inf
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) \
            or not least <= value <= most:
        raise ConfigurationError(f"{key} on an sqs connection must be whole seconds from {least:g} to {most:g}, "
                                 f"not {value!r}")
    return int(value)


def _seconds(settings: Mapping[str, Any], key: str) -> float:
    """A timeout in seconds within the key's declared bounds; its default when not written."""
    field = SCHEMA.fields[key]
    value = settings.get(key, field.default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not within(field, value):
        raise ConfigurationError(f"{key} on an sqs connection must be {describe(field)}, not {value!r}")
    return float(value)


def _attempts(settings: Mapping[str, Any]) -> int:
    value = settings.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_attempts on an sqs connection must be a whole number, at least 1, "
                                 f"not {value!r}")
    return value


def _visibility(settings: Mapping[str, Any]) -> int:
    """``visibility_timeout`` if written, else the ``reservation`` copy rounded up (longer is the safe way)."""
    if "visibility_timeout" not in settings and "reservation" in settings:
        reservation = settings["reservation"]
        if not isinstance(reservation, int | float) or not math.isfinite(reservation):
            raise ConfigurationError(f"reservation must be a number of seconds, not {reservation!r}")
        return min(MAX_VISIBILITY, max(1, math.ceil(reservation)))
    return _whole(settings, "visibility_timeout")


def _region_of(url: str) -> str:
    """The region an AWS queue URL names, else boto3's own (AWS_REGION, ~/.aws/config), else refused."""
    found = _AWS_HOST.fullmatch(urlsplit(url).hostname or "")
    if found:
        return found.group("a") or found.group("b")
    import boto3  # here, not at the top: the settings' declaration loads without boto3

    region = boto3.session.Session().region_name
    if not region:
        raise ConfigurationError(
            f"no region for the sqs queue {quoted(url)}: the URL does not name one and boto3 has no default; "
            "set region on the connection")
    return region


def _expanded(url: str, endpoint: str | None, region: str) -> str:
    """``sqs://<account>/<name>`` as the queue's whole URL, at ``endpoint`` or at AWS in ``region``."""
    parts = urlsplit(url)
    account, name = parts.netloc, parts.path.strip("/")
    if not account or not name or "/" in name or parts.query:
        raise ConfigurationError(
            f"queue_url {quoted(url)} must be sqs://<account>/<queue-name> (or the whole https URL)")
    server = endpoint.rstrip("/") if endpoint else f"https://sqs.{region}.amazonaws.com"
    return f"{server}/{account}/{name}"


def _base_name(url: str) -> str:
    """The default queue's SQS name, which every other jobbridge queue's name is derived from."""
    name = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    if name.endswith(".fifo"):
        raise ConfigurationError(
            f"queue_url {quoted(url)} is a FIFO queue; the sqs driver needs a standard queue, because a FIFO "
            "queue refuses a per-message delay (delayed jobs and released retries)")
    if not QUEUE_NAME.fullmatch(name):
        raise ConfigurationError(f"queue_url {quoted(url)} does not end in an SQS queue name "
                                 "(letters, digits, '-' and '_', at most 80)")
    return name
