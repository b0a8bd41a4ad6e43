from compat_events import count, record

from . import app, celery, in_app_context


class SMTPTemporaryError(Exception):
    pass


def deliver(to, subject, body):
    if count("send_mail") < 2:
        raise SMTPTemporaryError("421 4.7.0 try again later")


@celery.task(bind=True, max_retries=5, default_retry_delay=1)
def send_mail(self, to, subject, body):
    record("send_mail", to, subject, self.request.retries, in_app_context(), app.config["MAIL_SERVER"],
           self.request.hostname)
    try:
        deliver(to, subject, body)
    except SMTPTemporaryError as exc:
        raise self.retry(exc=exc, countdown=1) from exc
