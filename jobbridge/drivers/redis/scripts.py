"""The Lua scripts beside this module, registered on a client.

redis-py's `Script` runs EVALSHA and, on NOSCRIPT (a restarted server forgot
its script cache), loads the text and runs it again, so a restart needs
nothing from us here; the worker's per-batch calls (`connection.Direct`) do the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import redis
from redis.commands.core import Script

NAMES = (
    "push", "reserve", "acknowledge", "release", "fail", "extend", "reclaim", "hand_back", "retry",
    "lock_acquire", "lock_release", "purge",
)


def source(name: str) -> str:
    """The text of ``<name>.lua``, shipped as package data."""
    return resources.files(__package__ or __name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


def acknowledge_and_reserve_source() -> str:
    """acknowledge.lua then reserve.lua in one script: one round trip where a worker made two.

    Each file's text becomes the body of a function whose parameters ``KEYS`` and
    ``ARGV`` shadow the script's own, so both files stay the one statement of what they
    do. ARGV[1] and ARGV[2] are how many of the keys and of the other arguments are
    acknowledge.lua's; the rest are reserve.lua's, and its reply is the script's.
    Acknowledging is idempotent (an entry already gone is left alone), so a call that
    fails after the first half ran is simply made again.
    """
    return (
        "-- acknowledge.lua and reserve.lua in one call (built by scripts.py; each file's header applies)\n"
        f"local function acknowledge(KEYS, ARGV)\n{source('acknowledge')}\nend\n"
        f"local function reserve(KEYS, ARGV)\n{source('reserve')}\nend\n"
        "local nkeys, nargs = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
        "local ack_keys, ack_args, keys, args = {}, {}, {}, {}\n"
        "for i = 1, #KEYS do if i <= nkeys then ack_keys[i] = KEYS[i] else keys[i - nkeys] = KEYS[i] end end\n"
        "for i = 3, #ARGV do\n"
        "  if i <= nargs + 2 then ack_args[i - 2] = ARGV[i] else args[i - 2 - nargs] = ARGV[i] end\n"
        "end\n"
        "acknowledge(ack_keys, ack_args)\n"
        "return reserve(keys, args)\n"
    )


@dataclass(frozen=True, slots=True)
class Scripts:
    """One `Script` per file; each file's header names the keys it touches and its ARGV."""

    push: Script
    reserve: Script
    acknowledge: Script
    release: Script
    fail: Script
    extend: Script
    reclaim: Script
    hand_back: Script
    retry: Script
    lock_acquire: Script
    lock_release: Script
    purge: Script
    acknowledge_and_reserve: Script

    @classmethod
    def register(cls, client: redis.Redis) -> Scripts:
        return cls(**{name: client.register_script(source(name)) for name in NAMES},
                   acknowledge_and_reserve=client.register_script(acknowledge_and_reserve_source()))
