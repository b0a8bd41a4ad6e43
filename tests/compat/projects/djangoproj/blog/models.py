from django.db import models


class Post(models.Model):
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    published = models.BooleanField(default=False)
    word_count = models.PositiveIntegerField(null=True, blank=True)

    def __str__(self):
        return self.title
