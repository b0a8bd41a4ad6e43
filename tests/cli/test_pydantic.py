"""Pydantic models as payload fields: encoded in the model's JSON mode, decoded by validation, through a real worker.

``cli.ship`` carries an ``Order`` (a datetime, a Decimal, a nested model and
a validator). It is enqueued from the command line as JSON, stored, and run
by a ``jobbridge worker`` process, which writes what it decoded: the types
must come back as the model declares them. A value the model refuses is an
error naming the field, never the value, whether it comes from
``jobbridge enqueue`` or from a stored message.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from jobbridge import payload
from jobbridge.errors import PayloadDecodeError, PayloadEncodeError
from tests.cli import cli_app
from tests.cli.support import APP, jobbridge

ORDER = {"id": 7, "placed_at": "2026-03-01T09:30:00Z", "total": "19.90",
         "ship_to": {"street": "1 Quay St", "zip_code": 4020}, "tags": ["gift"]}


def test_a_model_field_round_trips_through_enqueue_and_a_worker(tmp_path: Path) -> None:
    out = tmp_path / "decoded.json"
    env = {"JOBBRIDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.sqlite3'}", "CLI_TEST_OUT": str(out)}
    queued = jobbridge("enqueue", "-A", APP, "cli.ship", "--payload", json.dumps({"order": ORDER}), env=env)
    assert queued.returncode == 0, queued.stderr
    ran = jobbridge("worker", "-A", APP, "-Q", "orders", "--stop-when-empty", "--sleep", "0.05", "-l", "warning",
                    env=env)
    assert "1 succeeded" in ran.stdout, ran.stdout + ran.stderr
    seen = json.loads(out.read_text())
    assert seen["model"] == "Order" and (seen["placed_at"], seen["total"], seen["zip_code"]) == (
        "datetime", "Decimal", "int")
    assert seen["dump"] == {**ORDER, "placed_at": "2026-03-01T09:30:00Z"}


def test_enqueue_refuses_what_the_model_refuses_naming_the_field(tmp_path: Path) -> None:
    env = {"JOBBRIDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.sqlite3'}"}
    bad = {**ORDER, "id": -31337, "ship_to": {"street": "x", "zip_code": "zip-secret"}}
    ran = jobbridge("enqueue", "-A", APP, "cli.ship", "--payload", json.dumps({"order": bad}), env=env)
    assert ran.returncode == 2
    assert "Ship.order: the stored value is not a valid Order" in ran.stderr
    assert "id: refused by a validator of the model" in ran.stderr and "ship_to.zip_code: Input should be" in ran.stderr
    assert "31337" not in ran.stderr and "zip-secret" not in ran.stderr


def test_encode_uses_the_models_json_mode_and_decode_validates() -> None:
    order = cli_app.Order(id=1, placed_at=datetime(2026, 1, 2, 3, 4, tzinfo=UTC), total=Decimal("1.50"),
                          ship_to=cli_app.Address(street="s", zip_code=1))
    job = cli_app.Ship(order=order)
    data = payload.encode(job)
    assert data == {"order": {"id": 1, "placed_at": "2026-01-02T03:04:00Z", "total": "1.50",
                              "ship_to": {"street": "s", "zip_code": 1}, "tags": []}}
    assert payload.decode(cli_app.Ship, data) == job
    with pytest.raises(PayloadDecodeError, match=r"Ship\.order: .* ship_to: Field required"):
        payload.decode(cli_app.Ship, {"order": {"id": 1, "placed_at": "2026-01-02T03:04:00Z", "total": "1"}})


def test_a_pydantic_version_1_model_is_refused_saying_what_to_pass() -> None:
    from pydantic import v1

    class Legacy(v1.BaseModel):
        n: int

    class Carry(cli_app.Noop, name="cli.carry"):
        legacy: object = None

    with pytest.raises(PayloadEncodeError, match=r"Carry\.legacy is a pydantic version 1 model .* model\.dict\(\)"):
        payload.encode(Carry(legacy=Legacy(n=1)))
