"""What a setting may be: one key's type and bounds, why a foreign key is refused, and a driver's whole table.

Each driver declares its connections' keys once, as a `DriverSchema` in its
settings module (which imports no client library, so the declaration loads
with only jobbridge installed). The boot-time checks in `jobbridge.settings`
read that declaration, and so does the driver's own ``parse_settings``
(`check_keys`, the defaults): a key the configuration accepts is never one the
driver silently drops, and a refusal has one wording wherever it is raised.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from jobbridge.errors import ConfigurationError, RefusedSetting
from jobbridge.redaction import MASK, quoted

Kind = Literal["str", "url", "int", "float", "bool", "list"]

DEFAULT_RESERVATION = 60.0


@dataclass(frozen=True)
class Field:
    """One key's type, bounds and default: ``least``/``most`` inclusive, ``above`` exclusive.

    ``secret``: a credential, whose value an error never shows (a URL's are masked, `jobbridge.redaction`).
    ``schemes``: the URL schemes a ``url`` key takes, so a URL meant for another store is refused.
    ``default``: what the driver uses when the key is not written (None: off, or derived, as the
    driver's settings module says). ``top_level``: the key also exists in the one-driver form, as
    ``<driver>_<key>`` (a key naming another connection cannot: that form declares only one).
    """

    kind: Kind
    least: float | None = None
    above: float | None = None
    most: float | None = None
    empty_ok: bool = False
    secret: bool = False
    schemes: tuple[str, ...] = ()
    default: Any = None
    top_level: bool = True


class Refusal(NamedTuple):
    """Why a key cannot be honoured, and what to write instead (in a file, then in the environment)."""

    why: str
    instead: str
    env_instead: str | None = None


#: the lease a worker renews by heartbeat, in seconds, on every driver that calls it ``reservation``
RESERVATION = Field("float", above=0, default=DEFAULT_RESERVATION)

#: the first key of a combination that would give a working-looking but wrong connection, and why
Combination = Callable[[Mapping[str, Any]], tuple[str, Refusal] | None]


@dataclass(frozen=True)
class DriverSchema:
    """One driver's connection keys, declared once in its settings module and read by every check.

    ``refused``: keys written for other queue libraries (or other drivers), with what to write instead;
    these come before the refusals `jobbridge.setting_checks` applies to every connection, so a driver
    can say why for its own connections in particular. ``required``: the key without which there is
    nothing to connect to. ``reservation_key``: the key that holds the lease (``visibility_timeout`` on
    sqs). ``store_keys``: the keys that together name one store, so that two connections on one store
    are refused. ``lock_store``: its store is shared by every worker and outlives them, so it can hold
    Kafka's leases. ``combination``: the check for keys that are each valid and wrong together.
    """

    fields: Mapping[str, Field]
    refused: Mapping[str, Refusal] = dataclass_field(default_factory=dict)
    required: str | None = None
    reservation_key: str = "reservation"
    store_keys: tuple[str, ...] = ()
    lock_store: bool = False
    combination: Combination | None = None

    def __post_init__(self) -> None:
        both = sorted(set(self.fields) & set(self.refused))
        if both:
            raise ValueError(f"a driver's schema both accepts and refuses {', '.join(both)}")
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))
        object.__setattr__(self, "refused", MappingProxyType(dict(self.refused)))

    @property
    def keys(self) -> frozenset[str]:
        """The keys a connection of this driver accepts, besides ``driver``."""
        return frozenset(self.fields)

    def default(self, key: str) -> Any:
        """The value the driver uses for ``key`` when it is not written."""
        return self.fields[key].default


#: keys a driver's ``parse_settings`` takes without declaring them: ``driver`` names the driver in a
#: connection's table, and the settings layer adds ``reservation`` to every connection's options (on sqs
#: and kafka a copy of visibility_timeout or lease), so code reading a connection finds the lease in one place
IMPLIED_KEYS = frozenset({"driver", "reservation"})


def check_keys(schema: DriverSchema, settings: Mapping[str, Any], where: str) -> None:
    """Refuse a key ``schema`` refuses, and name an unknown one with the keys it accepts."""
    for key in settings:
        if key in schema.fields or key in IMPLIED_KEYS:
            continue
        refusal = schema.refused.get(key)
        if refusal is not None:
            raise RefusedSetting(key, refusal.why, refusal.instead, where=where)
        raise ConfigurationError(f"unknown setting {key!r} on {where}; it accepts {', '.join(sorted(schema.fields))}")


# ---------------------------------------------------------------- checking one value


def describe(field: Field) -> str:
    """What a field expects, in words, for an error message."""
    noun = {"str": "a non-empty string", "url": "a URL (scheme://...)", "int": "a whole number",
            "float": "a number of seconds", "bool": "true or false",
            "list": "a list of names (or one comma-separated string)"}[field.kind]
    if field.empty_ok and field.kind == "str":
        noun = "a string"
    bounds = [f"at least {field.least:g}" if field.least is not None else "",
              f"greater than {field.above:g}" if field.above is not None else "",
              f"at most {field.most:g}" if field.most is not None else ""]
    limits = " and ".join(b for b in bounds if b)
    return f"{noun}, {limits}" if limits else noun


def coerce(field: Field, value: Any, label: str, text: bool = False) -> Any:
    """Check ``value`` against ``field`` (parsing it first when it came as text) and normalise it."""
    parsed = _from_text(field, value, label) if text and isinstance(value, str) else value
    ok, normalised = _checked(field, parsed)
    if not ok:
        raise ConfigurationError(f"{label} must be {describe(field)}, not {_shown(field, value)}")
    return normalised


def within(field: Field, value: float) -> bool:
    """Whether a number lies inside the field's bounds."""
    return ((field.least is None or value >= field.least) and (field.above is None or value > field.above)
            and (field.most is None or value <= field.most))


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _from_text(field: Field, text: str, label: str) -> Any:
    """An environment variable's string as the field's type."""
    raw = text.strip()
    try:
        if field.kind == "int":
            return int(raw)
        if field.kind == "float":
            return float(raw)
    except ValueError:
        raise ConfigurationError(f"{label} must be {describe(field)}, not {_shown(field, text)}") from None
    if field.kind == "bool" and raw.lower() in _TRUE | _FALSE:
        return raw.lower() in _TRUE
    return text


def _number(field: Field, value: Any) -> bool:
    whole = isinstance(value, int) and not isinstance(value, bool)
    if field.kind == "int":
        return whole
    return whole or (isinstance(value, float) and math.isfinite(value))


def _as_list(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str):
        value = value.split(",") if value.strip() else []
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        return None
    items = tuple(item.strip() for item in value)
    return None if "" in items or len(set(items)) != len(items) else items


def _checked(field: Field, value: Any) -> tuple[bool, Any]:
    """(valid, normalised value) for a value already of Python type."""
    kind = field.kind
    if kind in ("int", "float"):
        ok = _number(field, value) and within(field, value)
        return ok, (float(value) if kind == "float" and ok else value)
    if kind == "bool":
        return isinstance(value, bool), value
    if kind == "list":
        items = _as_list(value)
        return items is not None and (field.empty_ok or bool(items)), items
    ok = isinstance(value, str) and (field.empty_ok or bool(value.strip()))
    return ok and (kind == "str" or "://" in value), value


def _shown(field: Field, value: Any) -> str:
    """A refused value as an error quotes it: a credential never, a URL's credentials masked."""
    return f"{MASK} (a credential's value is never shown)" if field.secret else quoted(value)
