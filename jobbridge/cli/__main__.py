"""``python -m jobbridge.cli``: what the supervisor runs for each worker process, and the console script's twin."""

from jobbridge.cli import main

main()
