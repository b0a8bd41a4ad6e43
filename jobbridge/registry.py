"""The name -> class table a worker uses to turn a stored job back into code."""

from __future__ import annotations

import threading

from jobbridge.errors import JobDefinitionError, UnknownJob
from jobbridge.job import options_of


class JobRegistry:
    """Registered job classes by wire name; one class per name, for ever."""

    def __init__(self) -> None:
        self._by_name: dict[str, type] = {}
        self._lock = threading.Lock()

    def register(self, *classes: type) -> None:
        """Add job classes; a second class under a taken name is an error, the same class is not."""
        with self._lock:
            for cls in classes:
                name = options_of(cls).name
                known = self._by_name.get(name)
                if known is not None and known is not cls:
                    raise JobDefinitionError(
                        f"two job classes share the name {name!r}: {_where(known)} and {_where(cls)}; "
                        "a job name goes on the wire and must be unique"
                    )
                self._by_name[name] = cls

    def get(self, name: str) -> type:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownJob(
                f"no registered job is named {name!r}; register its class with bridge.register(...)"
            ) from None

    def name_of(self, cls: type) -> str:
        """The wire name of a registered class; `UnknownJob` if this class was never registered."""
        name = options_of(cls).name
        if self._by_name.get(name) is not cls:
            raise UnknownJob(
                f"job class {_where(cls)} is not registered; call bridge.register({cls.__name__}) "
                "or pass it in JobBridge(jobs=[...])"
            )
        return name

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def classes(self) -> list[type]:
        """The registered classes in the order they were registered (the default worker queues' order)."""
        with self._lock:
            return list(self._by_name.values())


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
