"""An sqs connection's settings: the keys it accepts, the ones it refuses, and their resolved form.

``queue_url`` is the whole URL of the connection's ``default`` queue. The form
``sqs://<account>/<queue-name>`` is short for the same queue at ``endpoint``
(or at ``https://sqs.<region>.amazonaws.com``). What is not written is derived,
never guessed silently: the region from an AWS queue URL's host, the endpoint
from a non-AWS queue URL's scheme and host, the visibility timeout from the
connection's ``reservation`` (rounded up to whole seconds).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import boto3

from jobbridge.errors import ConfigurationError, RefusedSetting

SETTINGS = frozenset({"queue_url", "region", "endpoint", "visibility_timeout", "wait_time", "key", "secret"})

_WHOLE_URL = "it composes an SQS queue URL out of parts, and an sqs connection is given the whole URL"
_VISIBILITY = ("on sqs the reservation is the visibility timeout, the SQS setting it maps to one to one",
               "visibility_timeout (whole seconds)")

REFUSED: Mapping[str, tuple[str, str]] = {
    "prefix": (_WHOLE_URL, "queue_url, the whole URL"),
    "suffix": (_WHOLE_URL, "queue_url, the whole URL"),
    "url": ("an sqs connection is given its queue's URL, not a server's",
            "queue_url (and endpoint for an SQS-compatible server)"),
    "retry_after": _VISIBILITY,
}

#: `reservation` arrives in a connection's options as a copy of visibility_timeout (settings.py)
_ALSO_ACCEPTED = frozenset({"driver", "reservation"})
DEFAULT_VISIBILITY = 60
MAX_VISIBILITY = 43200
MAX_WAIT = 20
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
    visibility_timeout: int = DEFAULT_VISIBILITY
    wait_time: int = MAX_WAIT
    key: str | None = None
    secret: str | None = None


def parse_settings(settings: Mapping[str, Any]) -> SqsSettings:
    """Validate and resolve a connection's options; a refused or unknown key is a boot failure naming it."""
    _check_keys(settings)
    url = _text(settings, "queue_url")
    if url is None:
        raise ConfigurationError("an sqs connection needs queue_url, the whole URL of its queue")
    endpoint = _text(settings, "endpoint")
    key, secret = _text(settings, "key"), _text(settings, "secret")
    if (key is None) != (secret is None):
        raise ConfigurationError("an sqs connection takes both key and secret, or neither")
    region = _text(settings, "region") or _region_of(url)
    if url.lower().startswith("sqs://"):
        url = _expanded(url, endpoint, region)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(f"queue_url must be https://host/<account>/<name> or sqs://<account>/<name>, "
                                 f"not {url!r}")
    return SqsSettings(
        queue_url=url, base=_base_name(url), region=region,
        endpoint=endpoint or (None if _AWS_HOST.fullmatch(parts.hostname or "") else f"{parts.scheme}://{parts.netloc}"),
        visibility_timeout=_visibility(settings), wait_time=_whole(settings, "wait_time", MAX_WAIT, 0, MAX_WAIT),
        key=key, secret=secret)


def _check_keys(settings: Mapping[str, Any]) -> None:
    for key in settings:
        if key in REFUSED:
            why, instead = REFUSED[key]
            raise RefusedSetting(key, why, instead, where="an sqs connection")
        if key not in SETTINGS and key not in _ALSO_ACCEPTED:
            raise ConfigurationError(
                f"unknown setting {key!r} on an sqs connection; it accepts {', '.join(sorted(SETTINGS))}")


def _text(settings: Mapping[str, Any], key: str) -> str | None:
    value = settings.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{key} on an sqs connection must be a non-empty string, not {value!r}")
    return value.strip()


def _whole(settings: Mapping[str, Any], key: str, default: int, least: int, most: int) -> int:
    value = settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) \
            or not least <= value <= most:
        raise ConfigurationError(f"{key} on an sqs connection must be whole seconds from {least} to {most}, "
                                 f"not {value!r}")
    return int(value)


def _visibility(settings: Mapping[str, Any]) -> int:
    """``visibility_timeout`` if written, else the ``reservation`` copy rounded up (longer is the safe way)."""
    if "visibility_timeout" not in settings and "reservation" in settings:
        reservation = settings["reservation"]
        if not isinstance(reservation, int | float) or not math.isfinite(reservation):
            raise ConfigurationError(f"reservation must be a number of seconds, not {reservation!r}")
        return min(MAX_VISIBILITY, max(1, math.ceil(reservation)))
    return _whole(settings, "visibility_timeout", DEFAULT_VISIBILITY, 1, MAX_VISIBILITY)


def _region_of(url: str) -> str:
    """The region an AWS queue URL names, else boto3's own (AWS_REGION, ~/.aws/config), else refused."""
    found = _AWS_HOST.fullmatch(urlsplit(url).hostname or "")
    region = (found.group("a") or found.group("b")) if found else boto3.session.Session().region_name
    if not region:
        raise ConfigurationError(
            f"no region for the sqs queue {url!r}: the URL does not name one and boto3 has no default; "
            "set region on the connection")
    return region


def _expanded(url: str, endpoint: str | None, region: str) -> str:
    """``sqs://<account>/<name>`` as the queue's whole URL, at ``endpoint`` or at AWS in ``region``."""
    parts = urlsplit(url)
    account, name = parts.netloc, parts.path.strip("/")
    if not account or not name or "/" in name or parts.query:
        raise ConfigurationError(f"queue_url {url!r} must be sqs://<account>/<queue-name> (or the whole https URL)")
    server = endpoint.rstrip("/") if endpoint else f"https://sqs.{region}.amazonaws.com"
    return f"{server}/{account}/{name}"


def _base_name(url: str) -> str:
    """The default queue's SQS name, which every other jobbridge queue's name is derived from."""
    name = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    if name.endswith(".fifo"):
        raise ConfigurationError(
            f"queue_url {url!r} is a FIFO queue; the sqs driver needs a standard queue, because a FIFO "
            "queue refuses a per-message delay (delayed jobs and released retries)")
    if not QUEUE_NAME.fullmatch(name):
        raise ConfigurationError(f"queue_url {url!r} does not end in an SQS queue name "
                                 "(letters, digits, '-' and '_', at most 80)")
    return name
