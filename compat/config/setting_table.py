"""Every Celery setting, by its name and its old upper-case name, and what the facade does with it.

Each setting is one of three kinds:

- ``honour``: read, and mapped to a jobbridge setting or to the facade's behaviour;
- ``accept``: already true of jobbridge, or about machinery jobbridge does not have, so the
  value changes nothing; the reason says why (docs/compat.md lists them all);
- ``refuse``: jobbridge cannot do what it asks; the error says what to write instead.

A rule may look at the value: an accepted setting given a value jobbridge cannot honour is
refused (``task_serializer = "pickle"``), and a refused one given its harmless default is
accepted (``beat_cron_starting_deadline = None``). A name in none of these tables is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import setting_results
from .setting_rules import OLD_NAMES, RULES, Rule
from .setting_rules import add as _add
from .setting_rules import empty as _empty


def _is(*allowed: Any) -> Callable[[Any], bool]:
    return lambda value: value in allowed


def _json_only(value: Any) -> bool:
    names = [value] if isinstance(value, str) else list(value or ["json"])
    return all(str(n).lower() in ("json", "application/json") for n in names)


def _json(value: Any) -> bool:
    return value is None or str(value).lower() in ("json", "application/json")

_QUEUE_NAMES = "jobbridge routes by queue name alone: there are no exchanges, bindings or queue types to declare"
_CONNECTION = ("each jobbridge driver manages its own client, bounded by the store's connect and answer "
               "timeouts: a worker backs off and retries a store that fails, and never exits for it")
_PUBLISH = ("a dispatch that cannot reach the store fails at once with DriverUnavailable, within the store's "
            "connect and answer timeouts, so the caller decides (retry, or fail the request)")
_PUBLISH_INSTEAD = ("remove it; on redis, redis_reconnect = true (and redis_reconnect_attempts) sends a command "
                    "again across a dropped connection")
_CHANNEL_ERRORS = ("a request RabbitMQ refuses (a channel error: a queue declared with other arguments, a message "
                   "too large) fails at once with the broker's reason; a lost connection is opened again at the "
                   "next call")
_WORKER_LOGGING = ("the worker adds a log handler only when the root logger has none, and leaves stdout and "
                   "stderr alone; connect setup_logging to configure logging yourself")
_ACKS = ("a job is acknowledged only after its attempt ends, and a job whose worker is lost comes back "
         "once its reservation lapses; write tasks to be safe to run twice")
_FAILED_STORE = "set it to True or remove it: a failed job goes to the failed store (jobbridge failed / retry)"
_PREFETCH = ("a worker reserves only what its threads can start soon, and delayed tasks wait in the store, "
             "not in worker memory")
_POOL = "jobbridge runs and supervises its own worker processes and threads (--processes, --concurrency)"
_JSON = "jobbridge stores every payload as JSON"
_JSON_ONLY = ("set it to 'json' (or remove it): pickle, yaml and msgpack are refused because a job's "
              "payload is JSON that any worker can read and nothing can turn into code")
_NO_CONTROL = "jobbridge has no remote control or Celery events: workers are watched with jobbridge status"
_EVENTS = ("no Celery events are sent: with it on (or -E), the worker says so in one warning line at its start; "
           "watch queues and workers with jobbridge status and jobbridge workers (docs/monitoring.md), and react "
           "to tasks with the signals")
#: the settings that ask for Celery events, named by the worker's warning when they are on
EVENT_SETTINGS = ("worker_send_task_events", "task_send_sent_event")
_PRIORITY = ("jobbridge orders work by queue, not by message priority: route urgent tasks to a queue the "
             "worker lists first (apply_async(queue='high'); jobbridge worker -Q high,celery)")
_BEAT_STATE = ("each entry's last fired tick is kept in the store, beside the jobs, and advanced in the same step "
               "as the push of the tick's task, so there is no schedule file to name or to sync")
_SECURITY = ("remove it: message signing is not provided; restrict who may write to the store "
             "(database grants, redis ACLs, SQS policies)")
_BROKER_PARTS = "write one broker_url (redis://user:password@host:port/db, sqla+postgresql://..., sqs://...)"
_LOGGING = ("configure logging yourself: connect celery.signals.setup_logging (jobbridge then leaves "
            "logging alone) or call logging.config.dictConfig in your app")
# -- honoured -----------------------------------------------------------------------------------
_add(Rule("honour", "selects the jobbridge driver and its URL (see docs/compat.md, broker URLs)"), """
broker_url BROKER_URL
""")
_add(Rule("honour", "read per key (docs/compat.md, broker URLs): each option becomes the driver's own setting "
          "(socket_timeout is redis_response_timeout_ms, global_keyprefix the redis prefix, region and "
          "predefined_queues configure sqs), changes nothing (visibility_timeout: the reservation is renewed "
          "while a task runs), or is refused with the reason"), """
broker_transport_options BROKER_TRANSPORT_OPTIONS
""")
_add(Rule("honour", "how long connecting to the store may take: the driver's connect timeout (redis "
          "connect_timeout_ms, database, sqs, kafka and amqp connect_timeout; a transport option's own wins); "
          "SQLite and memory have nothing to connect to"), """
broker_connection_timeout BROKER_CONNECTION_TIMEOUT
""")
# jobbridge's own, not Celery's (Celery ignores it): speak Celery's wire on the broker (compat/config/wire.py)
_add(Rule("honour", "'celery': jobs and results in Celery's own protocol and layout on the broker, so Celery and "
          "jobbridge processes share its queues during a rolling migration (docs/celery-wire.md); unset or "
          "'jobbridge': the native driver"), """
jobbridge_wire CELERY_JOBBRIDGE_WIRE
""")
_add(Rule("honour", "the facade runs tasks inline at delay()/apply_async(), as Celery does"), """
task_always_eager CELERY_ALWAYS_EAGER
task_eager_propagates CELERY_EAGER_PROPAGATES_EXCEPTIONS
""")
_add(Rule("honour", "the queue of a task that names none, and what a worker processes by default"), """
task_default_queue CELERY_DEFAULT_QUEUE
""")
_add(Rule("honour", "the queue names are what a worker processes by default; " + _QUEUE_NAMES), """
task_queues CELERY_QUEUES
""")
_add(Rule("honour", "routes a task to a queue: a dict by name or glob, a list of them, or router functions"), """
task_routes CELERY_ROUTES
""")
_add(Rule("honour", "True: any queue may be named; False: a queue missing from task_queues raises "
          "QueueNotFound at the call"), """
task_create_missing_queues CELERY_CREATE_MISSING_QUEUES
""")
_add(Rule("honour", "the default hard limit (the job's timeout) and soft limit (SoftTimeLimitExceeded "
          "raised inside the task) of every task that sets none"), """
task_time_limit CELERYD_TASK_TIME_LIMIT
task_soft_time_limit CELERYD_TASK_SOFT_TIME_LIMIT
""")
_add(Rule("honour", "how a naive eta is read: in timezone when set, else UTC (enable_utc) or local time"), """
timezone CELERY_TIMEZONE
enable_utc ENABLE_UTC
""")
_add(Rule("honour", "modules imported when the app is loaded by a worker, so their tasks are registered"), """
imports CELERY_IMPORTS
include CELERY_INCLUDE
""")
_add(Rule("honour", "the worker's concurrency: jobs one worker process runs at once, on threads"), """
worker_concurrency CELERYD_CONCURRENCY
""")

# -- accepted: already true of jobbridge, or about machinery it does not have ----------------------
_add(Rule("accept", _QUEUE_NAMES), """
task_default_exchange CELERY_DEFAULT_EXCHANGE
task_default_exchange_type CELERY_DEFAULT_EXCHANGE_TYPE
task_default_routing_key CELERY_DEFAULT_ROUTING_KEY
task_default_delivery_mode CELERY_DEFAULT_DELIVERY_MODE
task_default_queue_type CELERY_DEFAULT_QUEUE_TYPE
task_create_missing_queue_type CELERY_CREATE_MISSING_QUEUE_TYPE
task_create_missing_queue_exchange_type CELERY_CREATE_MISSING_QUEUE_EXCHANGE_TYPE
worker_detect_quorum_queues CELERYD_DETECT_QUORUM_QUEUES
broker_native_delayed_delivery_queue_type BROKER_NATIVE_DELAYED_DELIVERY_QUEUE_TYPE
""")
_add(Rule("honour", "amqp: the connection's heartbeat (seconds; 0 or None: none); another driver refuses any "
          "value but 0 or None (heartbeats belong to an AMQP connection)"), """
broker_heartbeat BROKER_HEARTBEAT
""")
_add(Rule("honour", "amqp: any positive rate is met, as the driver checks and sends heartbeats at each reserve (at "
          "least once a second) and each lease renewal; another driver refuses any value but Celery's 2"), """
broker_heartbeat_checkrate BROKER_HEARTBEAT_CHECKRATE
""")
_add(Rule("honour", "amqp: how the connection logs in (AMQPLAIN, PLAIN or EXTERNAL; anything else refused); "
          "another driver refuses it (it logs in with the URL's credentials)"), """
broker_login_method BROKER_LOGIN_METHOD
""")
_add(Rule("honour", "amqp: TLS on an amqp:// URL (as amqps://), with Celery's dict of ca_certs, certfile, keyfile, "
          "cert_reqs and server_hostname; another driver refuses it (TLS is chosen by its URL: rediss://)"), """
broker_use_ssl BROKER_USE_SSL
""")
_add(Rule("accept", _CHANNEL_ERRORS, "remove it: a refused request is reported, never sent again", _is(False, None)),
     """
broker_channel_error_retry BROKER_CHANNEL_ERROR_RETRY
""")
_add(Rule("accept", "there are no per-worker queues; " + _QUEUE_NAMES,
          "remove it; to send work to one worker, give it a queue of its own (-Q)", _is(False, None)), """
worker_direct CELERY_WORKER_DIRECT
""")
_add(Rule("honour", "every driver: True makes a worker that cannot reach its store at start try again with backoff "
          "(2 s, 2 s more each time, at most 30 s), broker_connection_max_retries times (100 unless set; None or 0: "
          "for ever) before it exits (jobbridge's start_retries); False or unset: it exits at once"), """
broker_connection_retry_on_startup BROKER_CONNECTION_RETRY_ON_STARTUP
""")
_add(Rule("honour", "the bound on a worker's retries at start (with broker_connection_retry_on_startup = True; "
          "refused without it, since a running worker never gives up on its store)"), """
broker_connection_max_retries BROKER_CONNECTION_MAX_RETRIES
""")
_add(Rule("honour", "amqp: a cap of 2 or more (or None) is kept, as each process holds two connections, one to "
          "push and one to reserve; 1 is refused. Another driver refuses any value but None (it does not cap "
          "its connections by a setting)"), """
broker_pool_limit BROKER_POOL_LIMIT
""")
_add(Rule("accept", _CONNECTION), """
broker_pool_acquire_timeout BROKER_POOL_ACQUIRE_TIMEOUT
worker_cancel_long_running_tasks_on_connection_loss CELERYD_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS
""")
_add(Rule("accept", _CONNECTION, "remove it: a worker never exits for a store that fails", _is(True, None)), """
broker_connection_retry BROKER_CONNECTION_RETRY
""")
_add(Rule("accept", _PUBLISH, _PUBLISH_INSTEAD, _is(False, None)), """
task_publish_retry CELERY_TASK_PUBLISH_RETRY
""")
_add(Rule("accept", _PUBLISH, _PUBLISH_INSTEAD, _empty), """
task_publish_retry_policy CELERY_TASK_PUBLISH_RETRY_POLICY
""")
_add(Rule("accept", _ACKS), """
task_acks_late CELERY_ACKS_LATE
task_reject_on_worker_lost CELERY_REJECT_ON_WORKER_LOST
task_retry_on_worker_lost CELERY_RETRY_ON_WORKER_LOST
worker_lost_wait CELERYD_WORKER_LOST_WAIT
""")
_add(Rule("accept", "a failed or timed-out task is acknowledged into the failed store",
          _FAILED_STORE, _is(True, None)), """
task_acks_on_failure_or_timeout CELERY_ACKS_ON_FAILURE_OR_TIMEOUT
task_acks_on_failure CELERY_ACKS_ON_FAILURE
task_acks_on_timeout CELERY_ACKS_ON_TIMEOUT
""")
_add(Rule("accept", _PREFETCH), """
worker_prefetch_multiplier CELERYD_PREFETCH_MULTIPLIER
worker_disable_prefetch CELERYD_DISABLE_PREFETCH
worker_enable_prefetch_count_reduction CELERYD_ENABLE_PREFETCH_COUNT_REDUCTION
worker_eta_task_limit CELERYD_ETA_TASK_LIMIT
""")
_add(Rule("accept", _POOL), """
worker_pool_putlocks CELERYD_POOL_PUTLOCKS
worker_pool_restarts CELERYD_POOL_RESTARTS
worker_pool_start_method CELERYD_POOL_START_METHOD
worker_proc_alive_timeout CELERYD_PROC_ALIVE_TIMEOUT
worker_autoscaler CELERYD_AUTOSCALER
worker_consumer CELERYD_CONSUMER
worker_timer CELERYD_TIMER
worker_timer_precision CELERYD_TIMER_PRECISION
worker_enable_soft_shutdown_on_idle CELERYD_ENABLE_SOFT_SHUTDOWN_ON_IDLE
worker_soft_shutdown_timeout CELERYD_SOFT_SHUTDOWN_TIMEOUT
worker_agent CELERYD_AGENT
""")
_add(Rule("accept", _WORKER_LOGGING), """
worker_hijack_root_logger CELERYD_HIJACK_ROOT_LOGGER
worker_redirect_stdouts CELERY_REDIRECT_STDOUTS
worker_redirect_stdouts_level CELERY_REDIRECT_STDOUTS_LEVEL
""")
_add(Rule("accept", _POOL + "; sync tasks run on threads",
          "remove it: there is no gevent or eventlet pool; tasks run on threads (--concurrency) in "
          "--processes processes", _is(None, "prefork", "solo", "threads", "processes")), """
worker_pool CELERYD_POOL
""")
_add(Rule("accept", _JSON, _JSON_ONLY, _json), """
task_serializer CELERY_TASK_SERIALIZER
result_serializer CELERY_RESULT_SERIALIZER
event_serializer CELERY_EVENT_SERIALIZER
""")
_add(Rule("accept", _JSON, _JSON_ONLY, _json_only), """
accept_content CELERY_ACCEPT_CONTENT
result_accept_content RESULT_ACCEPT_CONTENT
""")
_add(Rule("accept", "payloads are stored uncompressed", "remove it: compression is not provided",
          _is(None)), """
task_compression CELERY_MESSAGE_COMPRESSION
result_compression CELERY_RESULT_COMPRESSION
""")
_add(Rule("accept", "the message format is jobbridge's own; payloads are never logged"), """
task_protocol CELERY_TASK_PROTOCOL
task_repr_maxlevels CELERY_REPR_MAXLEVELS
""")
setting_results.file_rules()
_add(Rule("accept", _NO_CONTROL), """
worker_enable_remote_control CELERY_ENABLE_REMOTE_CONTROL
control_exchange CONTROL_EXCHANGE
control_queue_durable CONTROL_QUEUE_DURABLE
control_queue_exclusive CONTROL_QUEUE_EXCLUSIVE
control_queue_expires CONTROL_QUEUE_EXPIRES
control_queue_ttl CONTROL_QUEUE_TTL
event_exchange CELERY_EVENT_EXCHANGE
event_queue_durable CELERY_EVENT_QUEUE_DURABLE
event_queue_exclusive CELERY_EVENT_QUEUE_EXCLUSIVE
event_queue_expires CELERY_EVENT_QUEUE_EXPIRES
event_queue_prefix CELERY_EVENT_QUEUE_PREFIX
event_queue_ttl CELERY_EVENT_QUEUE_TTL
beat_enable_remote_control CELERYBEAT_ENABLE_REMOTE_CONTROL
beat_remote_control_max_tick_age CELERYBEAT_REMOTE_CONTROL_MAX_TICK_AGE
""")
_add(Rule("accept", _EVENTS), """
worker_send_task_events CELERY_SEND_EVENTS
task_send_sent_event CELERY_SEND_TASK_SENT_EVENT
""")
_add(Rule("honour", "True: workers start every task as soon as they can, whatever its rate_limit "
          "(docs/rate-limits.md)"), """
worker_disable_rate_limits CELERY_DISABLE_RATE_LIMITS
""")
_add(Rule("honour", "the rate_limit of every task that sets none, enforced per worker as Celery does "
          "(docs/rate-limits.md)"), """
task_default_rate_limit CELERY_DEFAULT_RATE_LIMIT
""")

# -- refused unless harmless ---------------------------------------------------------------------
_add(Rule("refuse", "jobbridge has no per-message priority", _PRIORITY, _empty), """
task_default_priority CELERY_DEFAULT_PRIORITY
task_queue_max_priority CELERY_QUEUE_MAX_PRIORITY
task_inherit_parent_priority CELERY_INHERIT_PARENT_PRIORITY
""")
_add(Rule("refuse", "annotations are not provided",
          "write the options on the task: @app.task(max_retries=..., time_limit=...)", _empty), """
task_annotations CELERY_ANNOTATIONS
""")
_add(Rule("honour", "each entry becomes an entry of jobbridge's scheduler (jobbridge worker -B, jobbridge beat): "
          "each tick's task is sent once however many schedulers run (docs/compat.md, beat)"), """
beat_schedule CELERYBEAT_SCHEDULE
""")
_add(Rule("honour", "read when a scheduler starts, and only then (a worker without -B, delay() and manage.py "
          "migrate never read it): the default runs jobbridge's scheduler, "
          "django_celery_beat.schedulers:DatabaseScheduler adds the entries of django-celery-beat's tables; any "
          "other scheduler class is refused then, with the reason"), """
beat_scheduler CELERYBEAT_SCHEDULER
""")
_add(Rule("honour", "the longest the scheduler waits between looks at its entries (it wakes for each tick "
          "anyway; by default it looks at least every 30 s)"), """
beat_max_loop_interval CELERYBEAT_MAX_LOOP_INTERVAL
""")
_add(Rule("accept", _BEAT_STATE), """
beat_schedule_filename CELERYBEAT_SCHEDULE_FILENAME
beat_sync_every CELERYBEAT_SYNC_EVERY
""")
_add(Rule("refuse", "a missed tick follows the entry's catch_up, not a deadline: after every scheduler was down, "
          "the most recent missed tick fires once (catch_up 'latest')",
          "remove it; to skip missed ticks, give the entry options={'catch_up': 'none'} (only ticks on time fire)",
          _empty), """
beat_cron_starting_deadline CELERYBEAT_CRON_STARTING_DEADLINE
""")
_add(Rule("refuse", "message signing is not provided", _SECURITY, _empty), """
security_key CELERY_SECURITY_KEY
security_key_password CELERY_SECURITY_KEY_PASSWORD
security_certificate CELERY_SECURITY_CERTIFICATE
security_cert_store CELERY_SECURITY_CERT_STORE
security_digest CELERY_SECURITY_DIGEST
""")
_add(Rule("refuse", "a backend is named by one URL", _BROKER_PARTS, _empty), """
broker_host BROKER_HOST
broker_port BROKER_PORT
broker_user BROKER_USER
broker_password BROKER_PASSWORD
broker_vhost BROKER_VHOST
broker_transport BROKER_TRANSPORT
broker_read_url BROKER_READ_URL
broker_write_url BROKER_WRITE_URL
broker_failover_strategy BROKER_FAILOVER_STRATEGY
""")
_add(Rule("refuse", "a worker takes its process recycling from the command line",
          "pass --max-tasks-per-child N to jobbridge worker", _empty), """
worker_max_tasks_per_child CELERYD_MAX_TASKS_PER_CHILD
""")
_add(Rule("refuse", "worker processes are not recycled by memory use",
          "remove it, or recycle by count with jobbridge worker --max-tasks-per-child N", _empty), """
worker_max_memory_per_child CELERYD_MAX_MEMORY_PER_CHILD
""")
_add(Rule("refuse", "jobbridge does not format the app's logs from Celery settings", _LOGGING, _empty), """
worker_log_format CELERYD_LOG_FORMAT
worker_task_log_format CELERYD_TASK_LOG_FORMAT
worker_log_datefmt CELERYD_LOG_DATEFMT
worker_task_log_datefmt CELERYD_TASK_LOG_DATEFMT
worker_log_color CELERYD_LOG_COLOR
""")
_add(Rule("accept", "revokes are kept in the result store, which every worker reads before it runs a task: no "
          "worker-local state file is needed, and a worker that was offline still sees them"), """
worker_state_db CELERYD_STATE_DB
""")

NEW_NAMES: dict[str, str] = {new: old for old, new in OLD_NAMES.items()}

__all__ = ["EVENT_SETTINGS", "NEW_NAMES", "OLD_NAMES", "RULES", "Rule"]
