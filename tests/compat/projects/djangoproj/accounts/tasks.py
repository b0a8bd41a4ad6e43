from django.utils import timezone
from jobbridge.compat import shared_task

from .models import Account


class Undeliverable(Exception):
    pass


@shared_task(bind=True)
def send_welcome(self, account_id):
    """Welcome a new account; an address on a reserved domain cannot be mailed."""
    account = Account.objects.get(pk=account_id)
    if account.email.endswith('.invalid'):
        raise Undeliverable(f'account {account_id} has no deliverable address')
    account.welcomed_at = timezone.now()
    account.save(update_fields=['welcomed_at'])
    return {'account': account_id, 'queue': self.request.delivery_info['routing_key']}
