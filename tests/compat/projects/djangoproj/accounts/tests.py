from django.test import TestCase

from .models import Account
from .tasks import Undeliverable, send_welcome


class WelcomeTests(TestCase):
    def test_a_welcome_is_sent(self):
        account = Account.objects.create(email='ann@example.com')
        result = send_welcome.delay(account.pk)
        self.assertEqual(result.get()['account'], account.pk)
        account.refresh_from_db()
        self.assertIsNotNone(account.welcomed_at)

    def test_an_undeliverable_address_raises_in_the_caller(self):
        account = Account.objects.create(email='bob@example.invalid')
        with self.assertRaises(Undeliverable):
            send_welcome.delay(account.pk)
