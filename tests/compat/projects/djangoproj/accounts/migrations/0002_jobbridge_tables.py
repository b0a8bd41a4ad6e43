from django.db import migrations

from jobbridge.integrations.django_migrations import create_tables


class Migration(migrations.Migration):
    atomic = False  # jobbridge creates its tables on a connection of its own

    dependencies = [
        ('accounts', '0001_initial'),
    ]

    operations = [
        migrations.RunPython(create_tables, migrations.RunPython.noop),
    ]
