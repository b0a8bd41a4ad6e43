from compat_events import record
from jobbridge.compat import shared_task


@shared_task(bind=True)
def send_welcome_email(self, user_id):
    record("send_welcome_email", user_id, self.request.delivery_info["routing_key"])
