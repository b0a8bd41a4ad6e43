from django.db import models


class Account(models.Model):
    email = models.EmailField(unique=True)
    welcomed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return self.email
