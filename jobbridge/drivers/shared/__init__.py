"""What a broker driver takes from another connection's store: the failed store and unique-job locks.

A broker that keeps no per-job state of its own (Kafka's offsets, RabbitMQ's
deliveries) cannot list, retry or flush failed jobs, nor hold a lock; the
drivers built on one (`jobbridge.drivers.kafka`, `jobbridge.drivers.amqp`) keep
those in the connection named by their ``locks`` setting, a database or redis
connection every worker shares and that outlives them. This package is what
both use of it:

- `locks`: which kind of store the app passed (`store_kind`), and the unique
  locks under a key prefix of the connection's own (`ScopedLocks`);
- `failed_rows`: a failed job as every store can keep it (`failed_record`);
- `sql_failed` and `redis_failed`: the failed rows on a database and on Redis,
  under a scope each connection files its rows by.
"""
