"""``celery.canvas``: signatures and the workflows built from them.

- `Signature` (``add.s(2)``, ``add.si(2, 2)``, ``signature("proj.add", ...)``): compat/signature.py;
- `chain`, `group`: compat/primitives.py; `chord`, `chunks`, `xmap`, `xstarmap`: compat/chords.py;
- what a worker does with them when a task ends: compat/flow.py.

docs/canvas.md describes each, and how the messages carry them.
"""

from __future__ import annotations

from .chords import chord, chunks, xmap, xstarmap
from .primitives import chain, group
from .signature import Signature, maybe_signature, signature, subtask

__all__ = ["Signature", "chain", "chord", "chunks", "group", "maybe_signature", "signature", "subtask", "xmap",
           "xstarmap"]
