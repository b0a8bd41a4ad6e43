"""Put jobbridge's Celery facade in place of ``celery`` before anything imports it, in every process.

This directory goes first on ``PYTHONPATH`` for the processes that run Celery's own
examples and integration suite (tests/compat/celery_source.py): Python imports
``sitecustomize`` at start-up, so ``import celery`` in code nobody here wrote
resolves to the facade with no change to that code. This is the one change the
examples get; nothing else of Celery's is replaced.
"""

from jobbridge.compat import install_as_celery

install_as_celery()
