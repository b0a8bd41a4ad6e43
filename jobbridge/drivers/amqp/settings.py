"""An amqp connection's settings: the keys it accepts, the ones it refuses, and their parsed form.

`SCHEMA` is the one declaration of them: the boot-time checks (`jobbridge.settings`)
and `parse_settings` both read it, and this module imports no client library, so
a configuration is checked the same way whether or not kombu is installed.

``url`` is ``amqp://user:password@host:port/vhost`` or ``amqps://...`` (TLS);
``locks`` names the database or redis connection that holds the failed store
and the unique-job locks (RabbitMQ holds neither well). ``queue_type`` is
``quorum`` (replicated, the default: a job whose dispatch returned survives a
broker restart, delays included) or ``classic``. ``prefetch`` is 0 (the number
of jobs the worker asks for when it first reserves: its free threads) or a
fixed number of deliveries per queue. ``consumer_timeout`` is the server's
(RabbitMQ's ``consumer_timeout``, 1800 s unless changed there; 0 where it is
disabled): a worker refuses at start-up a job whose timeout the broker would
cut short.
``delay_scale`` shortens broker-held delays (1: a delay of a minute waits a
minute; 0: delays come back at once and wait in the worker, for tests on a
`FixedClock`). Nothing waits forever: ``connect_timeout`` (5 s) bounds opening
a connection, ``request_timeout`` (10 s) one request and the confirm of a push;
``heartbeat`` (60 s, 0 for none) lets both sides see a dead peer. ``login_method``
(AMQPLAIN, PLAIN or EXTERNAL) is how the connection logs in; ``tls`` (what
``amqps://`` also turns on) with ``tls_ca_file``, ``tls_cert_file``,
``tls_key_file``, ``tls_verify`` and ``tls_server_hostname`` configure TLS.
"""

from __future__ import annotations

import re
import ssl as _ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobbridge.errors import ConfigurationError
from jobbridge.limits import MAX_NAME_LENGTH
from jobbridge.redaction import quoted
from jobbridge.setting_schema import RESERVATION, DriverSchema, Field, Refusal, check_keys, coerce

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_REQUEST_TIMEOUT = 10.0
#: RabbitMQ's own default ``consumer_timeout`` (30 minutes)
DEFAULT_CONSUMER_TIMEOUT = 1800.0
#: RabbitMQ's default ``max_message_size`` (128 MiB)
DEFAULT_MAX_MESSAGE_BYTES = 128 * 1024 * 1024
QUEUE_TYPES = ("quorum", "classic")
#: the SASL mechanisms py-amqp speaks
LOGIN_METHODS = ("AMQPLAIN", "PLAIN", "EXTERNAL")

_HELD = Refusal(
    "a reserved job is an unacknowledged delivery, held for as long as the worker's connection lives "
    "and handed back by the broker the moment it drops; there is no redelivery timer to set",
    "nothing (consumer_timeout says how long the server lets a delivery be held)",
)
_PREFETCH = Refusal("that is the client's name for it", "prefetch (deliveries per queue; 0: the worker's free threads)")

SCHEMA = DriverSchema(
    fields={
        "url": Field("url", secret=True, schemes=("amqp", "amqps", "pyamqp")),
        "locks": Field("str", top_level=False),
        "prefix": Field("str", empty_ok=True, default="jobbridge."),
        "queue_type": Field("str", default="quorum"),
        "prefetch": Field("int", least=0, most=65535, default=0),
        "reservation": RESERVATION,
        "consumer_timeout": Field("float", least=0, default=DEFAULT_CONSUMER_TIMEOUT),
        "delay_scale": Field("float", least=0, most=1, default=1.0),
        "heartbeat": Field("float", least=0, most=3600, default=60.0),
        "connect_timeout": Field("float", least=0.1, most=300, default=DEFAULT_CONNECT_TIMEOUT),
        "request_timeout": Field("float", least=0.1, most=300, default=DEFAULT_REQUEST_TIMEOUT),
        "max_message_bytes": Field("int", least=1024, default=DEFAULT_MAX_MESSAGE_BYTES),
        "login_method": Field("str", empty_ok=True, default=""),
        "tls": Field("bool", default=False),
        "tls_ca_file": Field("str", empty_ok=True, default=""),
        "tls_cert_file": Field("str", empty_ok=True, default=""),
        "tls_key_file": Field("str", empty_ok=True, default=""),
        "tls_verify": Field("bool", default=True),
        "tls_server_hostname": Field("str", empty_ok=True, default=""),
    },
    refused={
        "visibility_timeout": _HELD,
        "retry_after": _HELD,
        "prefetch_count": _PREFETCH,
        "worker_prefetch_multiplier": _PREFETCH,
        "exchange": Refusal(
            "every queue has its own durable queue, named prefix + the queue, pushed to directly; an exchange "
            "setting would be a decoy no job is routed through",
            "prefix (and, in the Celery facade, task_queues / task_routes)",
        ),
        "confirm_publish": Refusal("every push is confirmed by the broker before it returns; that is not optional",
                                   "nothing"),
        "durable": Refusal("every queue is durable and every message persistent; that is not optional",
                           "nothing"),
        "x_max_priority": Refusal(
            "jobbridge works queues in the order the worker names them; priorities inside one queue would "
            "reorder jobs the port promises in order",
            "a queue per priority, named in order: --queue high,default",
        ),
        "pool_limit": Refusal("each process keeps two connections (one to push, one to reserve); there is no "
                              "pool to size", "nothing"),
    },
    required="url",
    store_keys=("url", "prefix"),
)
SETTINGS = SCHEMA.keys
REFUSED = SCHEMA.refused
SCHEMES = tuple(f"{scheme}://" for scheme in SCHEMA.fields["url"].schemes)

#: what a queue name may hold: its words become a routing key's words (`jobbridge.drivers.amqp.topology`)
QUEUE_CHARS = re.compile(r"[A-Za-z0-9_:-]+(\.[A-Za-z0-9_:-]+)*")
#: the longest queue name: RabbitMQ's 255-byte limit, less the prefix and a delay stage's suffix and bits
ROUTING_ROOM = 255 - 2 * 33


@dataclass(frozen=True, slots=True)
class AmqpSettings:
    """One amqp connection, validated."""

    url: str
    locks: str
    prefix: str = SCHEMA.default("prefix")
    queue_type: str = SCHEMA.default("queue_type")
    prefetch: int = SCHEMA.default("prefetch")
    reservation: float = SCHEMA.default("reservation")
    consumer_timeout: float = SCHEMA.default("consumer_timeout")
    delay_scale: float = SCHEMA.default("delay_scale")
    heartbeat: float = SCHEMA.default("heartbeat")
    connect_timeout: float = SCHEMA.default("connect_timeout")
    request_timeout: float = SCHEMA.default("request_timeout")
    max_message_bytes: int = SCHEMA.default("max_message_bytes")
    login_method: str = ""
    tls: bool = False
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_verify: bool = True
    tls_server_hostname: str = ""

    @property
    def ssl(self) -> bool | dict[str, object] | None:
        """TLS as kombu takes it: None (plain), True (verified against the system's CAs), or its options."""
        if not (self.tls or self.url.startswith("amqps://")):
            return None
        options: dict[str, object] = {key: value for key, value in (
            ("ca_certs", self.tls_ca_file), ("certfile", self.tls_cert_file), ("keyfile", self.tls_key_file),
            ("server_hostname", self.tls_server_hostname)) if value}
        if not self.tls_verify:
            options["cert_reqs"] = _ssl.CERT_NONE
        return options or True

    @property
    def broker_url(self) -> str:
        """The URL as kombu's py-amqp transport takes it (``pyamqp://`` is the facade's spelling of amqp)."""
        return "amqp://" + self.url.split("://", 1)[1] if self.url.startswith("pyamqp://") else self.url

    @property
    def scope(self) -> str:
        """What the shared store files this connection's rows under: its broker address, vhost and prefix."""
        rest = self.url.split("://", 1)[1]
        where = rest.rsplit("@", 1)[-1]  # never the credentials
        return f"{where}#{self.prefix}"


def parse_settings(settings: Mapping[str, Any]) -> AmqpSettings:
    """Validate a connection's settings; a refused, unknown or missing key is a boot failure naming it."""
    check_keys(SCHEMA, settings, "an amqp connection")
    url = settings.get("url")
    if not isinstance(url, str) or not url.startswith(SCHEMES):
        raise ConfigurationError(
            f"an amqp connection needs url = amqp://user:password@host:5672/vhost (or amqps://), got {quoted(url)}")
    locks = settings.get("locks")
    if not isinstance(locks, str) or not locks.strip():
        raise ConfigurationError(
            "an amqp connection needs locks = \"<name of a database or redis connection>\" (declare both in a "
            "connections section): RabbitMQ cannot list, retry or flush failed jobs nor hold a lock, so the failed "
            "store and the unique-job locks live in that shared store")
    queue_type = settings.get("queue_type", SCHEMA.default("queue_type"))
    if queue_type not in QUEUE_TYPES:
        raise ConfigurationError(
            f"queue_type on an amqp connection is 'quorum' (replicated; the default) or 'classic', not {queue_type!r}")
    prefix = settings.get("prefix", SCHEMA.default("prefix"))
    if not isinstance(prefix, str) or (prefix and not QUEUE_CHARS.fullmatch(prefix.rstrip("."))):
        raise ConfigurationError(
            f"prefix {prefix!r} cannot begin a RabbitMQ queue name here: use letters, digits, '_', ':', '-' and '.'")
    values = {key: _value(settings, key) for key in (
        "prefetch", "reservation", "consumer_timeout", "delay_scale", "heartbeat", "connect_timeout",
        "request_timeout", "max_message_bytes", "tls", "tls_ca_file", "tls_cert_file", "tls_key_file", "tls_verify",
        "tls_server_hostname")}
    method = str(settings.get("login_method") or "").upper()
    if method and method not in LOGIN_METHODS:
        raise ConfigurationError(f"login_method on an amqp connection is one of {', '.join(LOGIN_METHODS)} (or unset: "
                                 f"the broker's choice), not {method!r}")
    values["login_method"] = method
    return AmqpSettings(url=url, locks=locks.strip(), prefix=prefix, queue_type=queue_type, **values)


def _value(settings: Mapping[str, Any], key: str) -> Any:
    field = SCHEMA.fields[key]
    return coerce(field, settings.get(key, field.default), f"{key} on an amqp connection",
                  text=isinstance(settings.get(key), str))


def check_queue_name(prefix: str, queue: str) -> str:
    """The queue's RabbitMQ name; a queue whose name the routing keys cannot carry is refused, naming it."""
    if not queue or not QUEUE_CHARS.fullmatch(queue) or len(prefix) + len(queue) > ROUTING_ROOM \
            or len(queue) > MAX_NAME_LENGTH:
        raise ConfigurationError(
            f"queue {queue[:60]!r} cannot be an amqp queue: name it with words of letters, digits, '_', ':' and '-' "
            f"joined by '.', in at most {ROUTING_ROOM - len(prefix)} characters with this prefix (a delay's "
            "routing key carries the name)")
    return f"{prefix}{queue}"
