"""``python -m benchmarks sqlite|postgres|mysql|redis|rabbitmq|all``: jobbridge beside its peers, in one run.

Prints, per backend, a table (library, scenario, jobs, seconds, jobs/s, how
many times jobbridge's rate that is), the latency table, the issues' targets
with what was measured, and the machine. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from benchmarks import venv
from benchmarks.bytecode import compile_sources
from benchmarks.common import Options, ProbeServer
from benchmarks.report import machine, render_latency, render_rows

BACKENDS = ("sqlite", "postgres", "mysql", "redis", "rabbitmq")
#: the backends with peers to measure; sqlite and mysql run jobbridge alone, in the current interpreter
WITH_PEERS = ("postgres", "redis", "rabbitmq", "all")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("backend", choices=(*BACKENDS, "all"), help="which store's benchmark to run")
    parser.add_argument("--jobs", type=int, default=20_000, help="no-op jobs per measurement (default 20,000)")
    parser.add_argument("--time-limit", type=float, default=30.0,
                        help="seconds one measurement may take; a slower library is cut off and its rate "
                             "computed from what it did (default 30)")
    parser.add_argument("--latency-samples", type=int, default=200,
                        help="jobs dispatched one at a time for latency (default 200)")
    parser.add_argument("--latency-budget", type=float, default=20.0,
                        help="seconds of latency sampling per library at most (default 20)")
    parser.add_argument("--only", default="", help="comma-separated library names to run (default: all)")
    parser.add_argument("--venv", type=Path, default=venv.DEFAULT,
                        help=f"the peers' venv, created when missing (default {venv.DEFAULT})")
    parser.add_argument("--no-venv", action="store_true",
                        help="run in this interpreter; peers that are not installed here are reported so")
    return parser.parse_args(argv)


def backend_module(name: str) -> ModuleType:
    import importlib

    return importlib.import_module(f"benchmarks.backend_{name}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    needs_venv = args.backend in WITH_PEERS and not args.no_venv
    venv_problem = venv.reexec(args.venv, argv) if needs_venv else None
    opts = Options(jobs=args.jobs, time_limit=args.time_limit, latency_samples=args.latency_samples,
                   latency_budget=args.latency_budget)
    only = {name.strip() for name in args.only.split(",") if name.strip()} or None
    names = BACKENDS if args.backend == "all" else (args.backend,)
    print(f"jobbridge benchmarks, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(machine())
    if venv_problem:
        print(f"peers' venv unavailable, running in this interpreter: {venv_problem}")
    from benchmarks.stores import versions

    print("servers: " + ", ".join(versions()))
    print(f"command: python -m benchmarks {' '.join(argv)}")
    compile_sources()  # benchmarks/bytecode.py says why
    probe = ProbeServer()
    started = time.monotonic()
    try:
        for name in names:
            module = backend_module(name)
            t0 = time.monotonic()
            rows, latency = module.run(probe, opts, only)
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            print()
            print(render_rows(f"== {module.TITLE}: {opts.jobs:,} no-op jobs per measurement "
                              f"({time.monotonic() - t0:.0f}s; load average after: {load}) ==", rows))
            if latency:
                print()
                print(render_latency(f"-- {module.TITLE}: dispatch-to-start latency, an idle worker, "
                                     "one job at a time --", latency))
            checks = [target.check(rows, latency) for target in module.TARGETS]
            if checks:
                print()
                print("\n".join(checks))
            sys.stdout.flush()
    finally:
        probe.close()
    print(f"\ntotal {time.monotonic() - started:.0f}s; worker logs in {os.path.join('/tmp', 'jb-bench-logs')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
