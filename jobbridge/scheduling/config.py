"""The ``schedules`` section of jobbridge.toml (or ``[tool.jobbridge]``): one table per entry.

::

    [schedules.nightly-report]
    job = "reports.nightly"          # the job's stable name
    cron = "30 2 * * *"              # or every = 60 (seconds)
    tz = "Europe/Berlin"             # else the timezone setting, else UTC
    queue = "reports"                # optional: queue, tries, expires, catch_up, connection
    payload = { region = "eu" }      # the job's fields, decoded by their annotations

The section is checked twice, so that every mistake fails a boot and names the
entry and the field: when the settings load (`check_section`: keys, types, the
trigger, the time zone) and when a scheduler starts (`entry_from`: the job's
name against the registry, the payload against the job's fields), since the
jobs are registered by the app, after its settings are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobbridge import payload
from jobbridge.errors import ConfigurationError, PayloadDecodeError, UnknownJob
from jobbridge.redaction import quoted
from jobbridge.scheduling.entries import CATCH_UPS, Entry, expires_of
from jobbridge.scheduling.triggers import trigger_of

if TYPE_CHECKING:
    from jobbridge.app import JobBridge
    from jobbridge.scheduling.entries import EnvelopeFactory

#: each key of an entry's table, and what it must be
KEYS: dict[str, str] = {
    "job": "the job's stable name (a string)",
    "every": "a number of seconds",
    "cron": "five crontab fields as a string",
    "tz": "a time zone name (\"Europe/Berlin\")",
    "queue": "a queue name (a string)",
    "tries": "a whole number of at least 1",
    "expires": "a number of seconds, or \"next\"",
    "catch_up": " or ".join(f'"{c}"' for c in CATCH_UPS),
    "connection": "a declared connection's name",
    "payload": "a table of the job's fields",
}


def _fail(name: str, where: str, field: str, why: str) -> ConfigurationError:
    return ConfigurationError(f"schedule {name!r} ({where}): {field}: {why}")


def check_section(raw: object, where: str, timezone: str | None) -> dict[str, dict[str, Any]]:
    """The section as plain tables, each entry checked as far as it can be without the app's jobs."""
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"schedules ({where}) must be a table of entries ([schedules.<name>]), "
                                 f"not {quoted(raw)}")
    return {str(name): check_entry(str(name), table, where, timezone) for name, table in raw.items()}


def check_entry(name: str, table: object, where: str, timezone: str | None) -> dict[str, Any]:
    """One entry's table: known keys of the right types, a trigger that parses, a zone that exists."""
    if not isinstance(table, Mapping):
        raise _fail(name, where, "the entry", f"must be a table ([schedules.{name}]), not {quoted(table)}")
    for key in table:
        if key not in KEYS:
            raise _fail(name, where, str(key), f"unknown key; an entry takes {', '.join(KEYS)}")
    if "job" not in table:
        raise _fail(name, where, "job", "missing: name the job to dispatch by its stable name")
    for key, value in table.items():
        if not _typed(key, value):
            raise _fail(name, where, key, f"must be {KEYS[key]}, not {quoted(value)}")
    try:
        trigger_of(table.get("every"), table.get("cron"), table.get("tz"), timezone)
        expires_of(table.get("expires"), name)
    except ConfigurationError as exc:
        raise ConfigurationError(f"schedule {name!r} ({where}): {_without_entry(str(exc), name)}") from None
    return dict(table)


def _typed(key: str, value: Any) -> bool:
    if key == "payload":
        return isinstance(value, Mapping)
    if key == "tries":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if key == "every":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if key == "expires":
        return value == "next" or (isinstance(value, (int, float)) and not isinstance(value, bool))
    if key == "catch_up":
        return value in CATCH_UPS
    return isinstance(value, str) and bool(value.strip())


def _without_entry(message: str, name: str) -> str:
    """An entry's own error without its "schedule 'x': " prefix, which the caller writes with the file."""
    prefix = f"schedule {name!r}: "
    return message[len(prefix):] if message.startswith(prefix) else message


def entry_from(bridge: JobBridge, name: str, table: Mapping[str, Any], where: str) -> Entry:
    """An entry of the section as a scheduler runs it: its job found by name, its payload decoded."""
    job_name = str(table["job"])
    try:
        cls = bridge.registry.get(job_name)
    except UnknownJob:
        known = ", ".join(sorted(bridge.registry.names())) or "none"
        raise _fail(name, where, "job", f"no job is registered as {job_name!r} (registered: {known})") from None
    try:
        job = payload.decode(cls, dict(table.get("payload") or {}))
    except PayloadDecodeError as exc:
        raise _fail(name, where, "payload", str(exc)) from None
    except Exception as exc:  # a constructor's own check: its message may quote a value, so only its type
        raise _fail(name, where, "payload", f"does not make a {job_name} job ({type(exc).__name__})") from None
    queue, tries = table.get("queue"), table.get("tries")

    def build(tick: object) -> Any:
        return bridge.envelope(job, queue=queue, tries=tries)

    factory: EnvelopeFactory = build
    trigger = trigger_of(table.get("every"), table.get("cron"), table.get("tz"), bridge.settings.timezone)
    return Entry(name, trigger, factory, job_name, connection=table.get("connection"),
                 catch_up=table.get("catch_up", "latest"), expires=table.get("expires"))
