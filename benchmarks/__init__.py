"""jobbridge's benchmarks: ``python -m benchmarks sqlite|postgres|mysql|redis|all`` (see README.md).

Speed figures live here, never in the test suite: every library, jobbridge
included, is measured by the same harness in the same run, and the tables
report ratios rather than asserting times.
"""
