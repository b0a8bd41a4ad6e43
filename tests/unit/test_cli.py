"""The ``jobbridge`` command through click's CliRunner, and finding the app for ``-A``."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobbridge import Job, JobBridge, JobContext
from jobbridge.cli import CELERY_REFUSED, cli
from jobbridge.cli.working import hostname as _hostname
from jobbridge.drivers.memory import MemoryDriver
from jobbridge.loading import AppNotFound, load_app
from jobbridge.settings import Settings
from jobbridge.testing.clock import FixedClock
from jobbridge.testing.contract import pending


class CliNoop(Job, name="cli.noop"):
    n: int = 0

    def handle(self, ctx: JobContext) -> None:
        pass


def make_app() -> JobBridge:
    """The app for ``-A tests.unit.test_cli:make_app``: settings from the environment, read per call."""
    return JobBridge(Settings.load(), jobs=[CliNoop])


def memory_app() -> JobBridge:
    return JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[CliNoop])


def sync_app() -> JobBridge:
    return JobBridge(Settings.from_mapping({"driver": "sync"}), jobs=[CliNoop])


class Lossy(MemoryDriver):
    capabilities = dataclasses.replace(MemoryDriver.capabilities, may_lose_an_accepted_job=True)


def lossy_app() -> JobBridge:
    settings = Settings.from_mapping({"driver": "memory"})
    return JobBridge(settings, jobs=[CliNoop], drivers={"memory": Lossy()})


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A SQLite store named by JOBBRIDGE_DATABASE_URL, in an empty working directory."""
    path = tmp_path / "jobs.sqlite3"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JOBBRIDGE_DATABASE_URL", f"sqlite:///{path}")
    yield path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def failed_job(error: str = "ValueError: no such invoice\nTraceback ...") -> str:
    bridge = make_app()
    job_id = bridge.dispatch(CliNoop(n=1), queue="billing")
    assert job_id is not None
    (res,) = bridge.driver().reserve(["billing"], 1)
    bridge.driver().fail(res, error)
    bridge.close()
    return job_id


# -- help --------------------------------------------------------------------------------------


COMMANDS = ["worker", "enqueue", "purge", "failed", "retry", "flush", "status", "migrate", "reclaim", "demo"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_useful_help(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0
    summary = result.output.split("\n\n")[1]
    assert len(summary.split()) >= 5, f"{command} --help says what it does: {summary!r}"
    if command != "demo":
        assert "-A, --app" in result.output and "--connection" in result.output


def test_the_group_lists_the_commands() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0 and result.output.strip() == "jobbridge 0.1.0"


def test_worker_help_names_the_options_and_the_refused_celery_ones() -> None:
    text = run("worker", "--help").output
    for option in ("-Q, --queue", "-c, --concurrency", "--processes", "--max-jobs", "--max-tasks-per-child",
                   "--sleep", "--once", "--stop-when-empty", "-l, --loglevel", "-n, --hostname"):
        assert option in text
    assert "--supervised" not in text and "--stats-file" not in text
    assert "-P/--pool" in " ".join(text.split()) and "--autoscale" in text


# -- the worker command ------------------------------------------------------------------------


def test_a_scheduler_class_other_than_the_default_or_django_celery_beats_is_refused() -> None:
    result = run("worker", "-A", "tests.unit.test_cli:memory_app", "-B", "--scheduler", "redbeat.RedBeatScheduler")
    assert result.exit_code == 2
    assert "django_celery_beat.schedulers:DatabaseScheduler" in " ".join(result.output.split())


@pytest.mark.parametrize(("args", "says"), [
    (["-P", "prefork"], "--concurrency"),
    (["--pool=gevent"], "--processes"),
    (["--autoscale", "10,3"], "--concurrency"),
    (["--without-gossip"], "drop the option"),
    (["--without-mingle"], "drop the option"),
    (["--prefetch-multiplier", "4"], "drop the option"),
    (["--time-limit", "30"], "timeout="),
    (["--max-memory-per-child", "12000"], "--max-tasks-per-child"),
    (["--detach"], "systemd"),
])
def test_celery_options_it_cannot_honour_are_refused_by_name(args: list[str], says: str) -> None:
    result = run("worker", "-A", "tests.unit.test_cli:memory_app", *args)
    assert result.exit_code == 2
    assert "Celery worker option that jobbridge does not honour" in result.output
    assert says in " ".join(result.output.split())


def test_every_refused_option_says_why() -> None:
    for names, _, why in CELERY_REFUSED:
        assert names and len(why) > 20


def test_worker_needs_an_app() -> None:
    result = run("worker")
    assert result.exit_code == 2 and "needs -A" in result.output


def test_worker_refuses_the_memory_driver_from_the_cli() -> None:
    result = run("worker", "-A", "tests.unit.test_cli:memory_app")
    assert result.exit_code == 1
    assert "another process can never see them" in " ".join(result.output.split())


def test_worker_refuses_the_sync_driver() -> None:
    result = run("worker", "-A", "tests.unit.test_cli:sync_app")
    assert result.exit_code == 1
    assert "nothing for a worker to take" in " ".join(result.output.split())


def test_max_jobs_and_max_tasks_per_child_do_not_mix(store: Path) -> None:
    result = run("worker", "-A", "tests.unit.test_cli:make_app", "--max-jobs", "5", "--max-tasks-per-child", "5")
    assert result.exit_code == 2 and "not both" in result.output


def test_worker_drains_the_store_and_prints_banner_and_summary(store: Path) -> None:
    bridge = make_app()
    bridge.dispatch_many(CliNoop(n=i) for i in range(5))
    bridge.dispatch(CliNoop(n=9), queue="high")
    bridge.close()
    result = run("worker", "-A", "tests.unit.test_cli:make_app", "-Q", "high,default", "-c", "2",
                 "--stop-when-empty", "--sleep", "0.05", "-l", "warning", "-n", "w1@%h")
    assert result.exit_code == 0, result.output
    assert f"sqlite at {store}" in result.output
    assert "high, default (in priority order)" in result.output
    assert "2 thread(s) per process x 1 process(es)" in result.output
    assert "Processed 6 job attempt(s): 6 succeeded" in result.output


def test_hostname_placeholders() -> None:
    host = _hostname(None)
    assert _hostname("w1@%h") == f"w1@{host}"
    assert _hostname("%n") == host.split(".")[0]


# -- the store commands ------------------------------------------------------------------------


def test_failed_prints_a_header_and_one_aligned_row_per_job(store: Path) -> None:
    job_id = failed_job()
    make_app().driver().migrate()
    result = run("failed")
    assert result.exit_code == 0
    header, line = result.stdout.strip().splitlines()
    assert header.split() == ["ID", "QUEUE", "JOB", "ATTEMPTS", "FAILED", "AT", "(UTC)", "ERROR"]
    assert line.split()[:4] == [job_id, "billing", "cli.noop", "1"]
    assert line.endswith("ValueError: no such invoice")
    assert line.index("billing") == header.index("QUEUE") and line.index("cli.noop") == header.index("JOB")
    assert f"store: sqlite:///{store}" in result.stderr


def test_failed_with_none_says_so(store: Path) -> None:
    make_app().driver().migrate()
    assert run("failed").stdout.strip() == "no failed jobs"


def test_failed_limit_says_how_many_are_hidden(store: Path) -> None:
    failed_job()
    failed_job()
    result = run("failed", "--limit", "1")
    assert "(1 shown of 2 failed" in result.stdout


def test_retry_puts_a_failed_job_back(store: Path) -> None:
    job_id = failed_job()
    result = run("retry", job_id)
    assert result.exit_code == 0 and f"put {job_id} back on its queue" in result.output
    assert pending(make_app().driver(), "billing") == 1


def test_retry_of_an_unknown_id_fails(store: Path) -> None:
    make_app().driver().migrate()
    result = run("retry", "nope")
    assert result.exit_code == 1
    assert "there is no failed job with id nope" in result.output


def test_retry_all_and_flush(store: Path) -> None:
    failed_job()
    failed_job()
    assert "put 2 failed job(s) back" in run("retry", "all").output
    failed_job()
    refused = CliRunner().invoke(cli, ["flush"], input="n\n")
    assert refused.exit_code == 1 and "for good?" in refused.output
    assert make_app().driver().failed.count() == 1
    result = CliRunner().invoke(cli, ["flush"], input="y\n")
    assert result.exit_code == 0 and "deleted 1 failed job(s)" in result.stdout
    assert make_app().driver().failed.count() == 0


def test_status_shows_the_store_queues_failed_and_capabilities(store: Path) -> None:
    bridge = make_app()
    bridge.dispatch_many(CliNoop(n=i) for i in range(3))
    bridge.dispatch(CliNoop(), delay=600)
    bridge.close()
    failed_job()
    result = run("status")
    assert result.exit_code == 0
    assert f"store        sqlite at {store}" in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("default"))
    assert row.split() == ["default", "4", "3", "1", "0"]
    assert "failed       1" in result.output
    assert "survives a restart: yes" in result.output
    assert "may lose a job" not in result.output  # SQLite keeps what it accepted
    # jobs are ready and no worker beats on the store
    assert "WARNING      jobs wait on default, and no live worker works it" in result.output


def test_status_says_plainly_when_the_store_may_lose_a_job() -> None:
    result = run("status", "-A", "tests.unit.test_cli:lossy_app")
    assert result.exit_code == 0
    assert "may lose a job it has accepted" in result.output


def test_migrate_and_reclaim(store: Path) -> None:
    assert run("migrate").stdout.strip() == f"migrated sqlite at {store}"
    settings = Settings.load()
    past = JobBridge(settings, jobs=[CliNoop], clock=FixedClock(1_000_000.0))
    past.dispatch(CliNoop())
    assert len(past.driver().reserve(["default"], 1)) == 1  # its lease ended long ago
    past.close()
    assert run("reclaim").stdout.strip() == "reclaimed 1 job(s) whose reservation had lapsed"


@pytest.mark.parametrize("url", ["postgresql://app:hunter2@db:port/app?password=hunter2",  # the port is no number
                                 "postgres:hunter2@db/app", "mongodb://app:hunter2@db/app?authSource=hunter2"])
@pytest.mark.parametrize("command", ["status", "failed", "migrate", "worker"])
def test_a_url_that_fails_is_never_printed_with_its_password(
        command: str, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JOBBRIDGE_DATABASE_URL", url)
    result = run(command, "-A", "tests.unit.test_cli:make_app")
    assert result.exit_code == 1 and result.output.splitlines()[-1].startswith("Error: ") and "***" in result.output
    assert "hunter2" not in result.output, result.output


def test_an_unknown_connection_is_an_error(store: Path) -> None:
    result = run("status", "--connection", "nope")
    assert result.exit_code == 1 and "no connection is named 'nope'" in result.output


def test_demo_says_when_the_module_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jobbridge.demo", None)
    result = run("demo")
    assert result.exit_code == 1 and "jobbridge.demo is missing" in result.output


# -- finding the app ---------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working directory for throwaway modules; they are forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


APP = "from jobbridge import JobBridge\nfrom jobbridge.settings import Settings\n"
MAKE = "JobBridge(Settings.from_mapping({'driver': 'memory'}))"


def test_load_module_colon_attr_from_the_working_directory(project: Path) -> None:
    (project / "proj_a.py").write_text(f"{APP}queue = {MAKE}\n")
    assert isinstance(load_app("proj_a:queue"), JobBridge)


@pytest.mark.parametrize("attr", ["bridge", "app", "celery"])
def test_load_a_module_finds_its_app_attribute(project: Path, attr: str) -> None:
    (project / f"proj_{attr}.py").write_text(f"{APP}{attr} = {MAKE}\n")
    assert isinstance(load_app(f"proj_{attr}"), JobBridge)


def test_load_the_celery_layout(project: Path) -> None:
    (project / "proj_c").mkdir()
    (project / "proj_c" / "__init__.py").write_text("")
    (project / "proj_c" / "celery.py").write_text(f"{APP}app = {MAKE}\n")
    assert isinstance(load_app("proj_c"), JobBridge)


def test_load_a_factory_and_an_object_with_jobbridge_app(project: Path) -> None:
    (project / "proj_f.py").write_text(
        f"{APP}def make():\n    return {MAKE}\n"
        f"class Celery:\n    def jobbridge_app(self):\n        return {MAKE}\nfacade = Celery()\n")
    assert isinstance(load_app("proj_f:make"), JobBridge)
    assert isinstance(load_app("proj_f:facade"), JobBridge)


def test_load_errors_name_what_was_tried(project: Path) -> None:
    (project / "proj_e.py").write_text("value = 3\ndef wrong():\n    return 3\n")
    with pytest.raises(AppNotFound, match=r"proj_e:bridge, proj_e:app, proj_e:celery, proj_e\.celery:app"):
        load_app("proj_e")
    with pytest.raises(AppNotFound, match="no module named 'missing_mod'"):
        load_app("missing_mod:app")
    with pytest.raises(AppNotFound, match="has no attribute 'nothing'"):
        load_app("proj_e:nothing")
    with pytest.raises(AppNotFound, match="is a int, not a JobBridge"):
        load_app("proj_e:value")
    with pytest.raises(AppNotFound, match=r"proj_e:wrong\(\) returned a int"):
        load_app("proj_e:wrong")


def test_an_import_error_inside_the_app_module_is_shown_as_it_is(project: Path) -> None:
    (project / "proj_broken.py").write_text("import not_installed_anywhere\n")
    with pytest.raises(ModuleNotFoundError, match="not_installed_anywhere"):
        load_app("proj_broken")


def test_cli_reports_a_missing_app() -> None:
    result = run("status", "-A", "surely_not_a_module_here:app")
    assert result.exit_code == 1 and "no module named" in result.output
