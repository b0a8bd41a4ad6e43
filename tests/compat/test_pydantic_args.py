"""``@app.task(pydantic=True)``: model arguments validated from the message's JSON, model results dumped to it.

Celery's integration tasks declare one (``add_pydantic``); the facade refused the
option where the task was declared, so every app that the shared task was bound
to failed at creation. Celery's documented behaviour is what is asserted here.
"""

from __future__ import annotations

from typing import Any

import pytest
from jobbridge.compat import Celery
from pydantic import BaseModel, ValidationError


class AddParameters(BaseModel):
    x: int
    y: int


class AddResult(BaseModel):
    value: int


def test_a_model_argument_arrives_as_the_model_and_a_model_result_leaves_as_json(app: Celery) -> None:
    seen: list[Any] = []

    @app.task(pydantic=True)
    def add(data: AddParameters, note: AddParameters | None = None) -> AddResult:
        seen.append((data, note))
        return AddResult(value=data.x + data.y)

    assert add.apply(({"x": 1, "y": 2},)).get() == {"value": 3}
    assert seen == [(AddParameters(x=1, y=2), None)]
    assert add.apply(({"x": 1, "y": 2}, {"x": 0, "y": 0})).get() == {"value": 3}
    assert seen[-1][1] == AddParameters(x=0, y=0)


def test_strict_validation_and_dump_options_are_passed_on(app: Celery) -> None:
    @app.task(pydantic=True, pydantic_strict=True, pydantic_dump_kwargs={"exclude": {"value"}})
    def add(data: AddParameters) -> AddResult:
        return AddResult(value=data.x + data.y)

    assert add.apply(({"x": 1, "y": 2},)).get() == {}
    with pytest.raises(ValidationError):
        add.apply(({"x": "1", "y": 2},)).get()


def test_without_the_option_a_dict_stays_a_dict(app: Celery) -> None:
    @app.task
    def echo(data: AddParameters) -> Any:
        return type(data).__name__

    assert echo.apply(({"x": 1, "y": 2},)).get() == "dict"
