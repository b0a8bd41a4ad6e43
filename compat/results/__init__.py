"""Results: the result store as the facade uses it, and what reads it.

This package owns ``app.backend`` (backend.py: every write and read of a task's
record, a saved group), `AsyncResult` / `EagerResult` (asyncresult.py), `GroupResult` /
`ResultSet` (groupresult.py), a stored failure raised again as an exception (remote.py)
and revoking, which is kept in the same store (control.py). It sits on compat/config/; the
public import path is compat/result.py.
"""
