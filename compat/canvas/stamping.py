"""Stamping (``sig.stamp(...)``, ``StampingVisitor``): refused, at the call, with what to write instead.

Celery's stamps are extra headers a visitor writes into every signature of a
canvas, and ``revoke_by_stamped_headers`` revokes by them. The facade does not
provide them: a canvas's messages carry the headers the caller gives, and a task
is revoked by its id. `StampingVisitor` is importable (and may be subclassed), so a
module that defines a visitor still imports; stamping a signature with it, or with
keyword stamps, raises `RefusedFeature` naming the replacement. docs/compat.md
(The canvas) gives the reason.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import RefusedFeature

REPLACEMENT = ("stamping is not provided: pass the values as headers (sig.set(headers={...}) or "
               "apply_async(headers={...})), which the task reads in self.request.headers, and revoke by "
               "task id (result.revoke(), app.control.revoke(id))")


def refuse(what: str) -> RefusedFeature:
    return RefusedFeature(f"{what} is refused: {REPLACEMENT}")


class StampingVisitor:
    """Celery's visitor base class; importable so that a module defining one imports, unusable to stamp."""

    def on_signature(self, actual_sig: Any, **headers: Any) -> dict[str, Any]:
        raise refuse("StampingVisitor.on_signature()")

    def on_group_start(self, group: Any, **headers: Any) -> dict[str, Any]:
        return {}

    def on_group_end(self, group: Any, **headers: Any) -> None:
        """Nothing: there is no stamping to finish."""

    def on_chain_start(self, chain: Any, **headers: Any) -> dict[str, Any]:
        return {}

    def on_chain_end(self, chain: Any, **headers: Any) -> None:
        """Nothing: there is no stamping to finish."""

    def on_chord_header_start(self, sig: Any, **header: Any) -> dict[str, Any]:
        return {}

    def on_chord_header_end(self, sig: Any, **header: Any) -> None:
        """Nothing: there is no stamping to finish."""

    def on_chord_body(self, sig: Any, **header: Any) -> dict[str, Any]:
        return {}

    def on_callback(self, callback: Any, **header: Any) -> dict[str, Any]:
        return {}

    def on_errback(self, errback: Any, **header: Any) -> dict[str, Any]:
        return {}


__all__ = ["REPLACEMENT", "StampingVisitor", "refuse"]
