"""Celery's settings, and the jobbridge settings they become.

This package owns configuration: ``app.conf`` and the classification of every Celery
setting (settings.py, with the tables in setting_table.py, setting_results.py and
setting_rules.py), what a ``broker_url`` and a ``result_backend`` name (brokers.py,
backends.py), and which queue a call goes to (routing.py). It reads an app only through
compat/ports.py and imports nothing of the facade above the leaves.
"""
