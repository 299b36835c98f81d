"""Configuration: one frozen dataclass per section, built once by the CLI.

Precedence: command-line flag, then the `TASKYARD_*` environment variable, then the default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class QueueConfig:
    """How the queue behaves; times in seconds unless named otherwise."""

    claim_timeout: int = 1200
    claim_work_timeout: float = 20.0
    deadline_delay: float = 0.0
    max_task_deadline_days: int = 5
    resolver_interval: float = 1.0
    expiry_interval: float = 600.0
    max_body_bytes: int = 10 * 1024 * 1024
    # A run's live log is refused (413) past this many bytes of UTF-8.
    max_live_log_bytes: int = 64 * 1024 * 1024
    # Whether claimTask must quote the poll message it claims from (messageId, receipt and
    # signature): "optional" (claimWork's workers and older ones have none) or "required".
    claim_messages: str = "optional"


@dataclass(frozen=True)
class ServerConfig:
    """Where the API listens and what it talks to."""

    host: str = "127.0.0.1"
    port: int = 8080
    public_url: str = ""
    data_dir: str = "./data"
    db: str = ""
    # Where events go: memory:// (in process) or amqp://user:password@host:port/vhost (RabbitMQ).
    events: str = field(default="memory://", repr=False)
    # Which exchange layouts the bus publishes: "tc" (TaskCluster's) and/or "seed" (v1/queue:*).
    event_profiles: tuple[str, ...] = ("tc", "seed")
    # The task-graph scheduler's id: the schedulerId of every task of its graphs.
    scheduler_id: str = "task-graph-scheduler"
    # Seconds the event log keeps published events, for stream clients that reconnect.
    event_retention: float = 600.0
    root_access_token: str = field(default="", repr=False)
    # Derives the access tokens of the clients stored in the database; every process of one
    # deployment needs the same key.
    secret_key: str = field(default="", repr=False)
    # The secret key before a change: stored secrets it sealed are still read, and re-sealed under
    # `secret_key` in the background (docs/operations.md, Rotating the secret key); "" when none.
    old_secret_key: str = field(default="", repr=False)
    # The SMTP server email notifications go through: smtp://user:password@host:port ("": none).
    smtp_url: str = field(default="", repr=False)
    queue: QueueConfig = field(default_factory=QueueConfig)
    # Where s3-type artifacts' bytes go: file:///dir or s3://bucket?endpoint=...&region=...
    artifacts: str = ""
    max_artifact_bytes: int = 1024**3
    # The origin blob and live-log URLs are built on, on a host name of its own (model/served.py);
    # empty: the root URL.
    blob_origin: str = ""
    # API processes forked to serve one port (`serve --processes`); above 1 on PostgreSQL only.
    processes: int = 1
    # Overload, per process (api/shedding.py, cli/connections.py); 0 means no bound.
    max_in_flight: int = 256  # requests at once, long polls, streams and ping aside (more: 503)
    max_long_polls: int = 4000  # claimWork long polls at once (more: answered at once, no task)
    db_wait_timeout: float = 5.0  # seconds a request waits for a database connection (then 503)
    max_running: int = 16  # API calls worked on at once; the others in flight wait their turn
    max_streams: int = 1000  # event and live-log streams at once (more: 503)
    max_streams_per_client: int = 100  # of those, one authenticated client's (more: 429)
    max_anonymous_streams_per_client: int = 25  # of those, one address's anonymous ones (more: 429)
    max_connections_per_client: int = 128  # connections one address holds at once, trusted proxies aside
    head_timeout: float = 10.0  # seconds a connection may take to send a request's head
    body_timeout: float = 30.0  # seconds a request's body may take, plus one per 64 KiB of it
    keep_alive_timeout: int = 5  # seconds an idle kept-alive connection stays open

    @property
    def root_url(self) -> str:
        return self.public_url or f"http://{self.host}:{self.port}"

    @property
    def blob_url(self) -> str:
        """The origin signed blob and live-log URLs are built on."""
        return self.blob_origin or self.root_url

    @property
    def artifacts_url(self) -> str:
        return self.artifacts or f"file://{Path(self.data_dir, 'artifacts').absolute()}"

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data_dir}/taskyard.sqlite3"


@dataclass(frozen=True)
class WorkerConfig:
    """Who a worker is, what it claims and how it runs tasks; times in seconds."""

    root_url: str
    client_id: str
    access_token: str = field(repr=False)
    certificate: str = field(default="", repr=False)
    task_queue_id: str = "local/default"
    worker_group: str = "local"
    worker_id: str = "worker"
    capacity: int = 1
    work_dir: str = "./work"
    max_run_time_limit: int = 86400
    # How often a running task's status is checked, so a cancellation stops it within seconds.
    status_interval: float = 2.0
    # How often new log lines are sent to the server for the live log.
    live_log_interval: float = 1.0
    # How it finds work: "claim-work" (claimWork's long poll) or "poll" (pollTaskUrls, the Azure-queue
    # messages and claimTask; docs/poll.md).
    protocol: str = "claim-work"
    # Seconds without a task after which the worker exits (status 0); 0: never.
    idle_timeout: float = 0.0
    # A root URL to register with (registerWorker) for credentials, proving the worker with the
    # static secret in `secret_file`; "": the credentials given.
    register: str = ""
    secret_file: str = ""
    provider_id: str = "static"
    # amqp://... to hear of its runs' cancellations from RabbitMQ (the status check then slows to a
    # safety net); empty: the status check alone.
    events: str = field(default="", repr=False)
