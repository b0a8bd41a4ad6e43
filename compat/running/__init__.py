"""A task call's life: published, run in a worker or inline, recorded, and what follows it.

This package owns the machinery under ``Task``: publishing a call (calling.py), the task
as a jobbridge job and what its attempt means to the worker (runner.py), Celery's tracer
(tracing.py) and soft time limit (softlimit.py), the results the facade records itself
(recording.py), a finished task's callbacks, chain and chord (flow.py), what follows an
inline run and ``Task.replace`` (eager.py), and Celery's worker signals (lifecycle.py).
It acts on apps and tasks through compat/ports.py and sits on compat/canvas/.
"""
