import os

from jobbridge.compat import Celery
from kombu import Exchange, Queue

app = Celery("amqpproj", broker="amqp://guest:guest@localhost:5672//",
             backend=os.environ.get("AMQPPROJ_BACKEND", "redis://localhost:6379/0"), include=["amqpproj.tasks"])

media = Exchange("media", type="direct")
reports = Exchange("reports", type="topic")

app.conf.update(
    task_default_queue="celery",
    task_default_exchange="celery",
    task_default_routing_key="celery",
    task_queues=(
        Queue("celery", Exchange("celery"), routing_key="celery"),
        Queue("media", media, routing_key="media.video"),
        Queue("reports", reports, routing_key="report.#"),
    ),
    task_routes={
        "amqpproj.tasks.encode": {"exchange": "media", "routing_key": "media.video"},
        "amqpproj.tasks.monthly": {"exchange": "reports", "routing_key": "report.monthly.pdf"},
    },
    broker_heartbeat=30,
    broker_connection_retry_on_startup=True,
    broker_pool_limit=10,
    result_expires=600,
)
