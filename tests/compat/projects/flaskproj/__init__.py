"""A Flask application with Celery, set up the way Flask's documentation showed for years.

Flask is not needed: `FlaskApp` stands in for ``flask.Flask`` (a config dict and an app context).
"""

import contextlib
import contextvars
import os

from compat_events import connect_receivers
from jobbridge.compat import Celery, signals

_in_context = contextvars.ContextVar("in_app_context", default=False)


class FlaskApp:
    def __init__(self, import_name):
        self.import_name = import_name
        self.config = {"DEBUG": False, "SECRET_KEY": "dev", "SESSION_COOKIE_NAME": "session"}

    @contextlib.contextmanager
    def app_context(self):
        token = _in_context.set(True)
        try:
            yield self
        finally:
            _in_context.reset(token)


def in_app_context():
    return _in_context.get()


def make_celery(app):
    celery = Celery(app.import_name, broker=app.config["CELERY_BROKER_URL"])
    celery.conf.update(app.config)

    class ContextTask(celery.Task):
        def __call__(self, *args, **kwargs):
            with app.app_context():
                return self.run(*args, **kwargs)

    celery.Task = ContextTask
    return celery


app = FlaskApp(__name__)
app.config.update(
    SQLALCHEMY_DATABASE_URI="sqlite:///app.db",
    MAIL_SERVER="localhost",
    MAIL_DEFAULT_SENDER="noreply@example.com",
    CELERY_BROKER_URL=os.environ.get("CELERY_BROKER_URL", "redis://localhost:6379/0"),
    CELERY_RESULT_BACKEND=os.environ.get("CELERY_RESULT_BACKEND", "redis://localhost:6379/1"),
    CELERY_DEFAULT_QUEUE="default",
    CELERY_ROUTES={"flaskproj.mail.send_mail": {"queue": "mail"}},
    CELERY_IGNORE_RESULT=True,
    CELERY_ACKS_LATE=True,
    CELERYD_CONCURRENCY=2,
    CELERYD_PREFETCH_MULTIPLIER=1,
)
celery = make_celery(app)
_receivers = connect_receivers(signals, "flaskproj")

from . import mail, reports  # noqa: E402,F401 - registers the tasks
