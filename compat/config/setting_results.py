"""The result backend's Celery settings, and what the facade does with each (see setting_table.py).

``result_backend`` becomes jobbridge's ``results`` (compat/config/backends.py), ``result_expires`` its
``result_ttl``; the settings of backends jobbridge does not have are accepted, since a
``result_backend`` naming one is refused.
"""

from __future__ import annotations

from .setting_rules import Rule, add
from .setting_rules import empty as _empty

_STORE_CLIENT = ("the result store's client retries a store that fails within each wait's deadline, and a "
                 "worker never fails a task because storing its result failed (that is logged)")
_CHORD_JOIN = ("a chord's join is a counter in the result store, decremented by each header task as it ends: "
               "nothing polls, and the counter is kept for result_expires")
_STORE_SOCKETS = ("the redis result store's client is bounded as the redis driver's is (5 s to connect, 5 s for "
                  "an answer unless its connection says otherwise), never retries a command that timed out, sets "
                  "no keepalive and caps no pool")
_STORE_SOCKETS_INSTEAD = ("remove it; when result_backend is the broker's redis, its timeouts are the broker's: write "
                          "broker_transport_options socket_timeout and socket_connect_timeout")
_DB_ENGINE = ("the result store's engine is built as the database driver's (its pool, and its connect and "
              "statement timeouts), and creates its tables when it opens")
_DB_ENGINE_INSTEAD = ("remove it: the engine is jobbridge's; its timeouts are the database connection's "
                      "connect_timeout and statement_timeout")
_OTHER_BACKENDS = ("configures a result backend jobbridge does not have; result_backend naming it is refused, "
                   "so this changes nothing")

RESULT_RULES: list[tuple[Rule, str]] = [
    (Rule("honour", "where task results, revokes and chord counters are kept (redis://, db+<database URL>; "
          "rpc:// and amqp:// are refused); with it set, tasks store their results, as in Celery"), """
    result_backend CELERY_RESULT_BACKEND
    """),
    (Rule("honour", "the database of the old result_backend = 'database'"), """
    database_url CELERY_RESULT_DBURI
    """),
    (Rule("honour", "how long a result, a revoke and a chord's counter are kept (jobbridge's result_ttl); "
          "None keeps them ten years"), """
    result_expires CELERY_TASK_RESULT_EXPIRES
    """),
    (Rule("honour", "the default of every task's ignore_result and track_started"), """
    task_ignore_result CELERY_IGNORE_RESULT
    task_track_started CELERY_TRACK_STARTED
    """),
    (Rule("honour", "a task that ignores its result still stores its failure"), """
    task_store_errors_even_if_ignored CELERY_STORE_ERRORS_EVEN_IF_IGNORED
    """),
    (Rule("honour", "eager calls (task_always_eager, apply()) store their result in the result backend"), """
    task_store_eager_result CELERY_STORE_EAGER_RESULT
    """),
    (Rule("honour", "a task whose id already has a SUCCESS result is acknowledged without running again"), """
    worker_deduplicate_successful_tasks CELERYD_DEDUPLICATE_SUCCESSFUL_TASKS
    """),
    (Rule("honour", "a chord's error callbacks are also linked to each of its header tasks (so they may "
          "run more than once)"), """
    task_allow_error_cb_on_chord_header CELERY_ALLOW_ERROR_CB_ON_CHORD_HEADER
    """),
    (Rule("accept", _STORE_CLIENT), """
    result_backend_always_retry CELERY_RESULT_BACKEND_ALWAYS_RETRY
    result_backend_base_sleep_between_retries_ms CELERY_RESULT_BACKEND_BASE_SLEEP_BETWEEN_RETRIES_MS
    result_backend_max_retries CELERY_RESULT_BACKEND_MAX_RETRIES
    result_backend_max_sleep_between_retries_ms CELERY_RESULT_BACKEND_MAX_SLEEP_BETWEEN_RETRIES_MS
    """),
    (Rule("accept", _STORE_SOCKETS, _STORE_SOCKETS_INSTEAD, _empty), """
    redis_max_connections CELERY_REDIS_MAX_CONNECTIONS
    redis_retry_on_timeout CELERY_REDIS_RETRY_ON_TIMEOUT
    redis_socket_connect_timeout CELERY_REDIS_SOCKET_CONNECT_TIMEOUT
    redis_socket_keepalive CELERY_REDIS_SOCKET_KEEPALIVE
    redis_socket_timeout CELERY_REDIS_SOCKET_TIMEOUT
    """),
    (Rule("accept", "a result store that is the broker's own is opened with the broker connection's settings",
          "remove it: when result_backend is the broker's store it takes broker_transport_options (the redis "
          "prefix is global_keyprefix there); any other store takes its settings from its URL", _empty), """
    result_backend_transport_options CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS
    """),
    (Rule("accept", "results are read from the store at each access; nothing is cached in the process"), """
    result_cache_max CELERY_MAX_CACHED_RESULTS
    """),
    (Rule("accept", _CHORD_JOIN), """
    result_chord_join_timeout CELERY_RESULT_CHORD_JOIN_TIMEOUT
    result_chord_retry_interval CELERY_RESULT_CHORD_RETRY_INTERVAL
    result_chord_expires CELERY_RESULT_CHORD_EXPIRES
    """),
    (Rule("accept", "results are never sent over AMQP"), """
    result_exchange CELERY_RESULT_EXCHANGE
    result_exchange_type CELERY_RESULT_EXCHANGE_TYPE
    result_persistent CELERY_RESULT_PERSISTENT
    """),
    (Rule("honour", "a result also keeps what the task was called with: AsyncResult.args, kwargs, worker, queue "
          "and retries, as Celery stores them (one more write per attempt; AsyncResult.name and date_done are "
          "kept without it)"), """
    result_extended CELERY_RESULT_EXTENDED
    """),
    (Rule("accept", "failures are kept for result_expires, like every result",
          "remove it, or set result_expires", _empty), """
    result_failure_expires CELERY_RESULT_FAILURE_EXPIRES
    """),
    (Rule("accept", "a failed task's traceback is stored as text (AsyncResult.traceback)"), """
    task_remote_tracebacks CELERY_REMOTE_TRACEBACKS
    """),
    (Rule("accept", _DB_ENGINE), """
    database_short_lived_sessions CELERY_RESULT_DB_SHORT_LIVED_SESSIONS
    database_create_tables_at_setup DATABASE_CREATE_TABLES_AT_SETUP
    """),
    (Rule("accept", _DB_ENGINE, _DB_ENGINE_INSTEAD, _empty), """
    database_engine_options CELERY_RESULT_ENGINE_OPTIONS
    database_engine_callback DATABASE_ENGINE_CALLBACK
    """),
    (Rule("refuse", "the result tables are jobbridge_results, jobbridge_cancelled and jobbridge_counters",
          "remove it", _empty), """
    database_table_names CELERY_RESULT_DB_TABLENAMES
    database_table_schemas DATABASE_TABLE_SCHEMAS
    """),
    (Rule("refuse", "the result store's redis server is named by one URL",
          "write it in result_backend: redis://user:password@host:port/db (rediss:// for TLS)", _empty), """
    redis_backend_use_ssl CELERY_REDIS_BACKEND_USE_SSL
    redis_db CELERY_REDIS_DB
    redis_host CELERY_REDIS_HOST
    redis_password CELERY_REDIS_PASSWORD
    redis_port CELERY_REDIS_PORT
    redis_username CELERY_REDIS_USERNAME
    """),
    (Rule("accept", _OTHER_BACKENDS), """
    cache_backend CELERY_CACHE_BACKEND
    cache_backend_options CELERY_CACHE_BACKEND_OPTIONS
    cassandra_auth_kwargs CASSANDRA_AUTH_KWARGS
    cassandra_auth_provider CASSANDRA_AUTH_PROVIDER
    cassandra_bundle_path CASSANDRA_BUNDLE_PATH
    cassandra_entry_ttl CASSANDRA_ENTRY_TTL
    cassandra_keyspace CASSANDRA_KEYSPACE
    cassandra_options CASSANDRA_OPTIONS
    cassandra_port CASSANDRA_PORT
    cassandra_read_consistency CASSANDRA_READ_CONSISTENCY
    cassandra_servers CASSANDRA_SERVERS
    cassandra_table CASSANDRA_TABLE
    cassandra_write_consistency CASSANDRA_WRITE_CONSISTENCY
    s3_access_key_id S3_ACCESS_KEY_ID
    s3_base_path S3_BASE_PATH
    s3_bucket S3_BUCKET
    s3_endpoint_url S3_ENDPOINT_URL
    s3_region S3_REGION
    s3_secret_access_key S3_SECRET_ACCESS_KEY
    azureblockblob_base_path AZUREBLOCKBLOB_BASE_PATH
    azureblockblob_connection_timeout AZUREBLOCKBLOB_CONNECTION_TIMEOUT
    azureblockblob_container_name AZUREBLOCKBLOB_CONTAINER_NAME
    azureblockblob_read_timeout AZUREBLOCKBLOB_READ_TIMEOUT
    azureblockblob_retry_increment_base AZUREBLOCKBLOB_RETRY_INCREMENT_BASE
    azureblockblob_retry_initial_backoff_sec AZUREBLOCKBLOB_RETRY_INITIAL_BACKOFF_SEC
    azureblockblob_retry_max_attempts AZUREBLOCKBLOB_RETRY_MAX_ATTEMPTS
    gcs_base_path GCS_BASE_PATH
    gcs_bucket GCS_BUCKET
    gcs_project GCS_PROJECT
    gcs_ttl GCS_TTL
    cosmosdbsql_collection_name COSMOSDBSQL_COLLECTION_NAME
    cosmosdbsql_consistency_level COSMOSDBSQL_CONSISTENCY_LEVEL
    cosmosdbsql_database_name COSMOSDBSQL_DATABASE_NAME
    cosmosdbsql_max_retry_attempts COSMOSDBSQL_MAX_RETRY_ATTEMPTS
    cosmosdbsql_max_retry_wait_time COSMOSDBSQL_MAX_RETRY_WAIT_TIME
    couchbase_backend_settings CELERY_COUCHBASE_BACKEND_SETTINGS
    arangodb_backend_settings CELERY_ARANGODB_BACKEND_SETTINGS
    mongodb_backend_settings CELERY_MONGODB_BACKEND_SETTINGS
    elasticsearch_max_retries CELERY_ELASTICSEARCH_MAX_RETRIES
    elasticsearch_retry_on_timeout CELERY_ELASTICSEARCH_RETRY_ON_TIMEOUT
    elasticsearch_save_meta_as_text CELERY_ELASTICSEARCH_SAVE_META_AS_TEXT
    elasticsearch_timeout CELERY_ELASTICSEARCH_TIMEOUT
    """),
]


def file_rules() -> None:
    """File the result settings' rules (called by setting_table, in its order)."""
    for rule, names in RESULT_RULES:
        add(rule, names)


__all__ = ["RESULT_RULES", "file_rules"]
