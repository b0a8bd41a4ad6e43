"""The dashboard through its ASGI and WSGI callables: pages, actions, and what keeps it safe.

- every page answers on the memory driver and on PostgreSQL, and none shows the
  connection URL or its password, even when the store cannot be reached;
- a POST without the CSRF token (or with another browser's, or from another
  origin) is refused and changes nothing; with it, retry and delete go through
  a confirmation first;
- with a token or basic auth every request without it gets 401;
  ``jobbridge dashboard --host 0.0.0.0`` without either refuses to start;
- read-only mode offers no action and refuses every POST;
- the failed list pages by cursor through failures that share one moment, and
  filters by job, queue, error text and time;
- the WSGI callable under a mount prefix links under that prefix.
"""

from __future__ import annotations

import base64
import io
import re
import sys
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from jobbridge import Job, JobContext
from jobbridge.app import JobBridge
from jobbridge.cli import cli
from jobbridge.dashboard import Auth, create_app, create_wsgi_app
from jobbridge.settings import Settings
from jobbridge.testing import FixedClock
from tests.services import ensure_postgres

PAGES = ["/", "/failed", "/workers", "/schedules", "/jobs", "/jobs/0190-missing"]


class Boom(Job, name="dash.boom", queue="mail", tries=1):
    n: int
    secret: str = "s3cret-payload-value"

    def handle(self, ctx: JobContext) -> None:
        raise ValueError(f"boom number {self.n}")


class Fine(Job, name="dash.fine", queue="bulk"):
    def handle(self, ctx: JobContext) -> None:
        pass


def failing_bridge(count: int = 5, clock: FixedClock | None = None) -> JobBridge:
    bridge = JobBridge(Settings.from_mapping({"driver": "memory"}), jobs=[Boom, Fine],
                       **({"clock": clock} if clock else {}))
    for n in range(count):
        bridge.dispatch(Boom(n=n))
    bridge.run_pending()
    bridge.dispatch(Fine(), delay=300)
    return bridge


def client(bridge: JobBridge, **options: object) -> TestClient:
    return TestClient(create_app(bridge, **options), base_url="http://127.0.0.1:8484")  # type: ignore[arg-type]


def csrf_of(c: TestClient) -> str:
    c.get("/failed")
    token = c.cookies.get("jobbridge_csrf")
    assert token
    return token


def ids_on(html: str) -> list[str]:
    return re.findall(r'<tr data-id="([^"]+)"', html)


def test_every_page_answers_and_the_failed_page_shows_the_error_but_not_the_payload() -> None:
    bridge = failing_bridge()
    c = client(bridge)
    for path in PAGES:
        assert c.get(path).status_code == 200, path
    page = c.get("/failed").text
    assert len(ids_on(page)) == 5 and "ValueError: boom number 3" in page and "s3cret-payload-value" not in page
    one = ids_on(page)[0]
    detail = c.get(f"/failed/{one}").text
    assert "Traceback" in detail and "s3cret-payload-value" not in detail
    assert '"secret": "s3cret-payload-value"' in c.get(f"/failed/{one}?payload=1").text.replace("&#34;", '"')
    overview = c.get("/").text
    assert re.search(r'data-queue="bulk">\s*<td>bulk</td>\s*<td class="n waiting">0</td>\s*'
                     r'<td class="n delayed">1</td>', overview)
    assert "5 failed jobs" in overview
    assert c.get(f"/jobs/{one}").text.count("FAILED") >= 1


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing() -> None:
    bridge = failing_bridge(2)
    c = client(bridge)
    token = csrf_of(c)
    target = bridge.driver().failed.list(1)[0].id
    form = {"action": "retry", "scope": "selected", "id": target, "confirmed": "1"}
    assert c.post("/failed/act", data=form).status_code == 403
    assert c.post("/failed/act", data={**form, "csrf": "x" * 43}).status_code == 403
    assert c.post("/failed/act", data={**form, "csrf": token},
                  headers={"Origin": "https://elsewhere.example"}).status_code == 403
    assert c.post("/failed/act", data={**form, "csrf": token},
                  headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    stranger = client(bridge)  # another browser: a token of its own, not this one's
    stranger.get("/")
    assert stranger.post("/failed/act", data={**form, "csrf": token}).status_code == 403
    assert bridge.driver().failed.count() == 2
    done = c.post("/failed/act", data={**form, "csrf": token}, follow_redirects=False)
    assert done.status_code == 303 and "done=retried" in done.headers["location"]
    assert bridge.driver().failed.count() == 1


def test_retry_and_delete_ask_for_confirmation_first() -> None:
    bridge = failing_bridge(4)
    c = client(bridge)
    token = csrf_of(c)
    ids = [job.id for job in bridge.driver().failed.list(4)]
    asked = c.post("/failed/act", data={"do": "delete:selected", "id": ids[:2], "csrf": token})
    assert asked.status_code == 200 and "Delete for good 2 failed jobs" in asked.text
    assert bridge.driver().failed.count() == 4
    c.post("/failed/act", data={"action": "delete", "scope": "selected", "id": ids[:2], "confirmed": "1",
                                "csrf": token})
    assert {job.id for job in bridge.driver().failed.list(10)} == set(ids[2:])
    asked = c.post("/failed/act", data={"do": "retry:all", "csrf": token})
    assert "all 2 failed jobs" in asked.text
    c.post("/failed/act", data={"action": "retry", "scope": "all", "confirmed": "1", "csrf": token})
    assert bridge.driver().failed.count() == 0
    assert {c.queue: c.ready for c in bridge.driver().counts()}["mail"] == 2


def test_with_auth_every_request_without_it_gets_401() -> None:
    bridge = failing_bridge(1)
    token = "t" * 24
    c = client(bridge, auth=Auth(token=token))
    for path in PAGES:
        assert c.get(path).status_code == 401, path
    assert c.post("/failed/act", data={"do": "retry:all"}).status_code == 401
    assert c.get("/", headers={"Authorization": "Bearer wrong-token-wrong-token"}).status_code == 401
    assert c.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    first = c.get(f"/failed?token={token}", follow_redirects=False)  # a browser's first visit
    assert first.status_code == 303 and "token" not in first.headers["location"]
    assert c.get("/failed").status_code == 200  # the cookie now
    basic = client(bridge, auth=Auth.basic("ops:pa55word"))
    assert basic.get("/").status_code == 401 and "Basic" in basic.get("/").headers["www-authenticate"]
    good = base64.b64encode(b"ops:pa55word").decode()
    bad = base64.b64encode(b"ops:guess").decode()
    assert basic.get("/", headers={"Authorization": f"Basic {good}"}).status_code == 200
    assert basic.get("/", headers={"Authorization": f"Basic {bad}"}).status_code == 401


@pytest.mark.parametrize("args", [["--host", "0.0.0.0"], ["--host", "::"], ["--host", "example.org"],
                                  ["--host", "0.0.0.0", "--token", "short"]])
def test_a_non_loopback_bind_without_auth_refuses_to_start(args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["dashboard", "--port", "1", *args], env={"JOBBRIDGE_DRIVER": "memory"})
    assert result.exit_code == 2 and "dashboard" in result.output
    assert "Token" in result.output or "not a loopback address" in result.output or "16 characters" in result.output


def test_read_only_offers_no_action_and_refuses_every_post() -> None:
    bridge = failing_bridge(2)
    c = client(bridge, read_only=True)
    page = c.get("/failed").text
    assert "Retry" not in page and "Delete" not in page and 'type="checkbox"' not in page
    token = csrf_of(c)
    one = bridge.driver().failed.list(1)[0].id
    assert "Retry" not in c.get(f"/failed/{one}").text
    for form in ({"retry_one": one}, {"action": "delete", "scope": "all", "confirmed": "1"}):
        assert c.post("/failed/act", data={**form, "csrf": token}).status_code == 403
    assert c.post(f"/jobs/{one}/cancel", data={"csrf": token}).status_code == 403
    assert bridge.driver().failed.count() == 2


def test_the_failed_list_pages_through_failures_of_one_moment_and_filters() -> None:
    clock = FixedClock()
    bridge = failing_bridge(7, clock=clock)  # all seven failed at the same moment
    clock.advance(60)
    bridge.dispatch(Boom(n=70))
    bridge.run_pending()
    c = client(bridge)
    seen: list[str] = []
    url = "/failed?size=3"
    while url:
        page = c.get(url).text
        seen += ids_on(page)
        found = re.search(r'id="older" href="([^"]+)"', page)
        url = found.group(1).replace("&amp;", "&") if found else ""
    assert len(seen) == 8 and len(set(seen)) == 8
    assert len(ids_on(c.get("/failed?error=NUMBER+70").text)) == 1
    assert len(ids_on(c.get("/failed?job=dash.boom&queue=mail").text)) == 8
    assert ids_on(c.get("/failed?queue=other").text) == []
    assert len(ids_on(c.get(f"/failed?since={clock.now() - 1}").text)) == 1
    assert len(ids_on(c.get(f"/failed?until={clock.now() - 1}").text)) == 7
    assert c.get("/failed?since=yesterday").status_code == 400


def test_the_wsgi_callable_links_under_its_mount_prefix() -> None:
    bridge = failing_bridge(1)
    app = create_wsgi_app(bridge)
    out: dict[str, object] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: object = None) -> None:
        out["status"], out["headers"] = status, headers

    environ = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "/ops/jobs", "PATH_INFO": "/failed", "QUERY_STRING": "",
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
               "wsgi.input": io.BytesIO(b""), "wsgi.errors": sys.stderr, "wsgi.url_scheme": "http",
               "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": False,
               "wsgi.run_once": False}
    body = b"".join(app(environ, start_response)).decode()
    assert str(out["status"]).startswith("200")
    assert 'href="/ops/jobs/workers"' in body and 'action="/ops/jobs/failed/act"' in body
    cookie = next(v for k, v in out["headers"] if k.lower() == "set-cookie")  # type: ignore[attr-defined]
    assert "Path=/ops/jobs" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie


@pytest.fixture()
def pg_bridge() -> Iterator[JobBridge]:
    ensure_postgres()
    url = "postgresql://postgres:Pw-n0t-shown@127.0.0.1:5432/test"
    bridge = JobBridge(Settings.from_mapping({"driver": "database", "database_url": url}), jobs=[Boom, Fine])
    bridge.driver().migrate()
    bridge.driver().failed.flush()
    yield bridge
    bridge.driver().failed.flush()
    bridge.close()


def test_no_page_shows_the_url_or_its_password(pg_bridge: JobBridge) -> None:
    pg_bridge.dispatch(Boom(n=1))
    pg_bridge.run_pending()
    c = client(pg_bridge)
    one = pg_bridge.driver().failed.list(1)[0].id
    for path in [*PAGES, f"/failed/{one}", f"/failed/{one}?payload=1", f"/jobs/{one}"]:
        page = c.get(path)
        assert page.status_code == 200, path
        assert "Pw-n0t-shown" not in page.text and "postgres:Pw" not in page.text, path
    assert "postgresql://postgres:***@127.0.0.1:5432/test" in c.get("/").text  # named, masked
    down = JobBridge(Settings.from_mapping(
        {"driver": "database", "database_url": "postgresql://postgres:Pw-n0t-shown@127.0.0.1:1/test"}))
    for path in PAGES:  # the pages that read the store say it did not answer; none names the password
        page = client(down).get(path)
        assert page.status_code == (200 if path in ("/schedules", "/jobs") else 503), path
        assert "Pw-n0t-shown" not in page.text, path
