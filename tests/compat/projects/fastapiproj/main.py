"""The API (FastAPI is not needed: the route handlers are plain functions here)."""

from .worker import celery, create_task


def run_task(payload: dict) -> dict:
    """POST /tasks"""
    task = create_task.delay(int(payload["type"]))
    return {"task_id": task.id}


def get_status(task_id: str) -> dict:
    """GET /tasks/{task_id}"""
    task_result = celery.AsyncResult(task_id)
    return {"task_id": task_id, "task_status": task_result.status, "task_result": task_result.result}
