"""Celery's own integration suite (``t/integration`` of its sdist) run against a jobbridge worker.

Celery's ``t/integration/conftest.py`` asks for ``celery_session_app`` and
``celery_session_worker`` (Celery's pytest fixtures) and reads ``TEST_BROKER`` /
``TEST_BACKEND``. Here a pytest of its own runs in the unpacked sdist
(tests/compat/celery_source.py) with the shim's ``sitecustomize``
(``install_as_celery()``), ``-p celery.contrib.pytest`` (how Celery's testing guide
enables its fixtures: the facade's, whose worker is a jobbridge worker in a
thread), Redis (db 14, db 13 for the full run) as broker and backend, and ``-p celery_standins``: stand-ins
for the Celery internals the suite's modules import at the top but do not test
(tests/compat/celery_shim/celery_standins.py says which, and why each is a
finding). Celery's code is not changed.

In the suite (``SUBSET``, well under a minute): a chosen part of ``test_tasks.py``
and ``test_canvas.py`` that passes today; the test asserts that none of it
regresses and writes every test's outcome to ``REPORT``.

The representative run (``test_tasks.py`` and ``test_canvas.py`` whole, about
200 tests, each capped at 20 s, a few longer by design (celery_standins.py ``LONGER``);
about 10 minutes), run by hand and reported in docs/compat.md (Celery's integration suite)::

    .venv/bin/python -m tests.compat.test_celery_integration_suite

It prints the counts per file and each failure's first line, and writes
``/tmp/jb-srv/celery-integration-full.json``. Some tests alone: ``-k EXPR`` or node ids
(``t/integration/test_canvas.py::test_chord::test_generator``), reported in
``/tmp/jb-srv/celery-integration-some.json``. ``test_backend.py`` is left out: it
tests only the Azure Blob backend (skipped on Celery without Azure credentials),
which the facade does not provide.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from tests.compat.celery_source import celery_source, shim_env
from tests.services import SRV, ensure_redis

pytestmark = pytest.mark.slow
#: the subset and the representative run each have a Redis database of their own (flushed before a run)
SUBSET_DB, FULL_DB = 14, 13
REPORT = SRV / "celery-integration-subset.json"
FULL_REPORT = SRV / "celery-integration-full.json"
REPRESENTATIVE = ("t/integration/test_tasks.py", "t/integration/test_canvas.py")

#: tests of Celery's suite that pass on jobbridge today (calling, results, retries, revokes, replace,
#: link_error, canvas), no teardown error among them, in about a minute. Not here though passing:
#: test_multithread_producer, whose own 10 s wait for its results a loaded machine can outlast (the
#: representative run has it)
SUBSET = tuple(f"t/integration/{test}" for test in (
    "test_tasks.py::test_class_based_tasks::test_class_based_task_retried",
    "test_tasks.py::test_tasks::test_simple_call",
    "test_tasks.py::test_tasks::test_basic_task",
    "test_tasks.py::test_tasks::test_ignore_result",
    "test_tasks.py::test_tasks::test_pydantic_annotations",
    "test_tasks.py::test_tasks::test_expired",
    "test_tasks.py::test_tasks::test_fail",
    "test_tasks.py::test_tasks::test_revoked",
    "test_tasks.py::test_tasks::test_wrong_arguments",
    "test_tasks.py::test_tasks::test_task_retried_once",
    "test_tasks.py::test_tasks::test_task_retried_headers",
    "test_tasks.py::test_tasks::test_unicode_task",
    "test_tasks.py::test_tasks::test_soft_time_limit_exceeding_time_limit",
    "test_tasks.py::test_task_redis_result_backend::test_ignoring_result_no_subscriptions",
    "test_tasks.py::test_task_replacement::test_replaced_task_nesting_level_1",
    "test_tasks.py::test_task_replacement::test_replaced_task_nesting_chain",
    "test_canvas.py::test_link_error::test_link_error_eager",
    "test_canvas.py::test_link_error::test_link_error_callback_error_callback_retries_eager",
    # what the full run of Celery's suite found (tests/compat/test_suite_findings.py and
    # test_canvas_suite_findings.py): message properties, unpickleable exceptions, the trace log,
    # ping, and the canvas cases
    "test_tasks.py::test_tasks::test_properties",
    "test_tasks.py::test_tasks::test_fail_with_unpickleable_exception",
    "test_tasks.py::test_trace_log_arguments::test_task_success",
    "test_tasks.py::test_trace_log_arguments::test_task_failed",
    "test_canvas.py::test_chain::test_chain_of_task_a_group_and_a_chord",
    "test_canvas.py::test_chain::test_replace_chain_with_empty_chain",
    "test_canvas.py::test_chain::test_group_result_not_has_cache",
    "test_canvas.py::test_chain::test_freezing_chain_sets_id_of_last_task",
    "test_canvas.py::test_chain::test_parent_ids",
    "test_canvas.py::test_chain::test_chain_flattening_keep_links_of_inner_chain",
    "test_canvas.py::test_chain::test_group_in_center_of_chain",
    "test_canvas.py::test_result_set::test_result_set",
    # a chord's result has its header's GroupResult as parent; a chord's errbacks, old and new style
    "test_canvas.py::test_chord::test_parent_ids",
    "test_canvas.py::test_chord::test_parent_ids__OR",
    "test_canvas.py::test_chord::test_upgraded_chord_link_error_with_header_errback_enabled",
    "test_canvas.py::test_chord::test_immutable_errback_called_by_chord_from_simple",
    "test_canvas.py::test_chord::test_mutable_errback_called_by_chord_from_simple[errback_task1]",
    # a frozen task id the body of two chords in turn; several failed header tasks; a generator's header
    "test_canvas.py::test_chord::test_mutable_errback_called_by_chord_from_chain_tail[errback_task0]",
    "test_canvas.py::test_chord::test_mutable_errback_called_by_chord_from_chain_tail[errback_task1]",
    "test_canvas.py::test_chord::test_immutable_errback_called_by_chord_from_group_fail_multiple",
    "test_canvas.py::test_chord::test_generator[3]",
    # a chain ending in a group in a chord's header: the member's place holds the group's results list
    "test_canvas.py::test_chord::test_nested_group_chain",
    "test_canvas.py::test_chord::test_nested_chord_group_chain_group_tail",
))


def run_suite(tests: tuple[str, ...], xml: Path, timeout: float, db: int,
              log: Path | None = None, select: str | None = None) -> subprocess.CompletedProcess[str]:
    """pytest on ``tests`` of Celery's sdist, against a jobbridge worker; outcomes in the junit ``xml``.

    Every test's call ends within its cap (celery_standins.py: 20 s, 45 s for test_retry; a test of
    subtests included), its teardown within 5 s more, and the run within ``timeout``. With ``log``,
    pytest's output goes there as it runs (one line a test), to follow a long run; ``select`` is
    pytest's ``-k`` expression.
    """
    import redis

    url = ensure_redis().rsplit("/", 1)[0] + f"/{db}"
    client = redis.Redis.from_url(url)
    client.flushdb()  # this db belongs to this run, and the suite's own tasks use Redis keys of their own
    client.close()
    # WORKER_LOGLEVEL: read by start_worker (Celery's and the facade's alike) for a test app with logging
    # enabled, as the suite's is; at Celery's default ("error") its two trace-log tests see no INFO record
    env = shim_env(TEST_BROKER=url, TEST_BACKEND=url, REDIS_HOST="127.0.0.1", REDIS_PORT="6379",
                   CELERY_SUITE_TEST_TIMEOUT="20", WORKER_LOGLEVEL="info")
    args = [sys.executable, "-m", "pytest", "-p", "celery_standins", "-p", "celery.contrib.pytest",
            "-p", "no:cacheprovider", "-p", "no:django", "-p", "no:timeout", "-v" if log else "-q", "-rfE",
            # no source excerpts in failure reports: their ast.parse in this thread, while the worker thread
            # formats a traceback (Python 3.11's traceback parses for its carets), can race in CPython 3.11
            # ("SystemError: AST constructor recursion depth mismatch", an INTERNALERROR that ends the run)
            "--tb=line",
            f"--junitxml={xml}", *(("-k", select) if select else ()), *tests]
    if log is None:
        return subprocess.run(args, cwd=celery_source(), env=env, capture_output=True, text=True, timeout=timeout)
    with log.open("w") as out:
        return subprocess.run(args, cwd=celery_source(), env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)


def node_id(classname: str, name: str) -> str:
    """pytest's node id from junit's ``t.integration.test_tasks.test_tasks`` and the test's name."""
    parts = classname.split(".")
    return "::".join(["/".join(parts[:3]) + ".py", *parts[3:], name])


def outcomes(xml: Path) -> dict[str, dict[str, str]]:
    """Each test's node id -> its outcome (passed, failed, error, skipped) and the first line of the reason."""
    found: dict[str, dict[str, str]] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        node = node_id(case.get("classname", ""), case.get("name", ""))
        outcome, reason = "passed", ""
        for tag, called in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            element = case.find(tag)
            if element is not None:
                text = (element.get("message") or element.text or "").strip()
                outcome, reason = called, (text.splitlines() or [""])[0][:300]
                break
        if node in found and outcome == "error":  # a teardown error beside the test's own outcome
            found[node]["teardown"] = reason
            continue
        found[node] = {"outcome": outcome, "reason": reason}
    return found


def per_file(found: dict[str, dict[str, str]]) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for node, result in found.items():
        counts.setdefault(node.split("::")[0], Counter())[result["outcome"]] += 1
    return counts


def test_a_chosen_part_of_celerys_integration_suite_passes(tmp_path: Path) -> None:
    xml = tmp_path / "subset.xml"
    done = run_suite(SUBSET, xml, timeout=300, db=SUBSET_DB)
    assert xml.exists(), f"pytest did not run:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    found = outcomes(xml)
    REPORT.write_text(json.dumps(found, indent=1, sort_keys=True))
    not_passed = {node: r for node, r in found.items() if r["outcome"] != "passed" or "teardown" in r}
    assert len(found) == len(SUBSET), f"ran {sorted(found)}\n{done.stdout[-3000:]}"
    assert not not_passed, f"{json.dumps(not_passed, indent=1)}\n{done.stdout[-5000:]}"


def main(argv: list[str] | None = None) -> None:
    """The representative run: every test of `REPRESENTATIVE`, counts per file, failures with their reasons.

    Given node ids (``t/integration/test_canvas.py::test_chord::test_chord_on_error``) or ``-k EXPR``,
    only those run, into a report of their own (``celery-integration-some.*``), on the same db.
    """
    import argparse

    parser = argparse.ArgumentParser(description="Celery's integration suite on a jobbridge worker")
    parser.add_argument("-k", dest="select", help="pytest's -k expression: only the tests it selects")
    parser.add_argument("tests", nargs="*", help="node ids under the sdist (t/integration/...); all when none")
    given = parser.parse_args(argv)
    name = "celery-integration-some" if given.tests or given.select else "celery-integration-full"
    xml, log = SRV / f"{name}.xml", SRV / f"{name}.log"
    report = FULL_REPORT if name == "celery-integration-full" else SRV / f"{name}.json"
    tests = tuple(given.tests) or REPRESENTATIVE
    print(f"running {' '.join(tests)}; pytest's output: {log}", flush=True)
    xml.unlink(missing_ok=True)
    run_suite(tests, xml, timeout=7200, db=FULL_DB, log=log, select=given.select)
    if not xml.exists():
        raise SystemExit(f"pytest wrote no report: the run did not finish; its output is in {log}")
    found = outcomes(xml)
    report.write_text(json.dumps(found, indent=1, sort_keys=True))
    for path, counts in sorted(per_file(found).items()):
        print(path, dict(counts))
    for node, result in sorted(found.items()):
        if result["outcome"] in ("failed", "error"):
            print(f"{result['outcome']:7} {node}: {result['reason']}")
    print(f"per-test outcomes: {report}")


if __name__ == "__main__":
    main()
