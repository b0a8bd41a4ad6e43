"""An app whose code names the URLs of a developer's machine, pointed elsewhere by the environment."""

from jobbridge.compat import Celery

app = Celery("deployed", broker="amqp://guest@localhost//", backend="rpc://", task_default_queue="deployed")


@app.task(name="loadingproj.deployed.add")
def add(x, y):
    return x + y
