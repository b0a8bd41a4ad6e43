"""``celery.result``: a published task's result, and many results together, read from the result store.

This module is the import path users write (``from jobbridge.compat.result import
AsyncResult``; ``celery.result`` after `install_as_celery`); the code is in
compat/results/: `AsyncResult` and `EagerResult` in asyncresult.py, `GroupResult` and
`ResultSet` in groupresult.py.
"""

from __future__ import annotations

from .results.asyncresult import AsyncResult, EagerResult, assert_not_in_task
from .results.groupresult import GroupResult, ResultSet, result_from_tuple, results_of

__all__ = ["AsyncResult", "EagerResult", "GroupResult", "ResultSet", "assert_not_in_task", "result_from_tuple",
           "results_of"]
