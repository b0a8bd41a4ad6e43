"""``celery.canvas``: signatures and the workflows built from them.

This package owns the canvas: what a call to make later is, and how calls compose.

- `Signature` (``add.s(2)``, ``add.si(2, 2)``, ``signature("proj.add", ...)``): signature.py;
- `chain`, `group`: primitives.py; `chord`: chords.py; `chunks`, `xmap`, `xstarmap`: maps.py,
  and the builtin tasks they run on: builtins.py;
- what a worker does with them when a task ends: compat/running/flow.py.

It sits above compat/results/ (applying a workflow gives results) and below compat/running/.
Celery's API makes chain, group and chord build one another (``sig | group`` is a chain, a
group followed by a step is a chord), so that cycle is here, inside this package, and nowhere else.
docs/canvas.md describes each, and how the messages carry them.
"""

from __future__ import annotations

from .chords import chord
from .maps import chunks, xmap, xstarmap
from .primitives import chain, group
from .signature import Signature, maybe_signature, signature, subtask
from .stamping import StampingVisitor

__all__ = ["Signature", "StampingVisitor", "chain", "chord", "chunks", "group", "maybe_signature", "signature",
           "subtask", "xmap", "xstarmap"]
