"""Settings, 12-factor style (django-environ).

With no environment at all the project runs in *embedded mode*: SQLite under ``var/``, an
in-memory channel layer, a local-memory cache and in-process jobs. ``DATABASE_URL`` and
``REDIS_URL`` switch to PostgreSQL and Redis (channel layer, Celery broker, cache, rate limits).
Every variable is documented in docs/configuration.md.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

CONFIG_DIR = Path(__file__).resolve().parent
BASE_DIR = CONFIG_DIR.parent  # the checkout, or site-packages when installed from the wheel

env = environ.Env()

# This instance's own state (the embedded database, the secret key, media, beat's schedule):
# var/ of the checkout unless DATA_DIR names another directory (pigeonhole-server --data-dir).
VAR_DIR = Path(env.str("DATA_DIR", default=str(BASE_DIR / "var"))).absolute()
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _shipped(name: str) -> Path:
    """The project's ``templates/`` or ``static/``: in a checkout beside manage.py; installed
    from the wheel, inside the config package (``config/_templates``, ``config/_static``:
    pyproject.toml's package-dir), so the wheel puts no generic top-level names into
    site-packages."""
    installed = CONFIG_DIR / f"_{name}"
    return installed if installed.is_dir() else BASE_DIR / name


TEMPLATES_DIR = _shipped("templates")
STATIC_DIR = _shipped("static")


def _embedded_secret_key() -> str:
    """A per-instance secret for embedded mode, kept in var/ (DATA_DIR) so sessions survive
    restarts."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env.str("SECRET_KEY", default="") or _embedded_secret_key()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'pigeonhole.sqlite3'}")
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several embedded processes share the file: WAL lets readers and the writer coexist and
    # IMMEDIATE transactions take the write lock up front instead of failing on upgrade.
    # synchronous=FULL: a commit is on disk before it returns (NORMAL in WAL mode may lose the
    # last transactions on power loss), so the SMTP 250 after commit keeps its promise.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    if DATABASES["default"]["NAME"] not in ("", ":memory:"):
        # The test database is a file beside the database (not Django's in-memory default), so
        # the processes a test starts (manage.py serve) share it.
        _db_path = Path(DATABASES["default"]["NAME"])
        DATABASES["default"]["TEST"] = {"NAME": str(_db_path.with_name(f"test_{_db_path.name}"))}
elif (DB_POOL_MAX := env.int("DB_POOL_MAX", default=10)) > 0:
    # A psycopg connection pool per process. Under ASGI every request runs its sync code in a
    # thread of its own, so connections kept per thread (CONN_MAX_AGE) pile up until PostgreSQL
    # refuses clients (50 concurrent API clients did it); a pool bounds them instead. A pooled
    # connection is handed back after each request or call, so persistence must be off.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DB_POOL_MIN", default=1),
        "max_size": DB_POOL_MAX,
        "timeout": env.float("DB_POOL_TIMEOUT", default=10.0),
    }
else:  # DB_POOL_MAX=0: no pool (e.g. behind PgBouncer), per-thread connections
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
EMBEDDED_DB = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
# The hot statements built once (an email's read, a page of inboxes, a one-row insert) are
# prepared on each pooled connection (config.django_adapter.prepared_cursor): PostgreSQL parses
# and plans them once per connection. On by default with the pool; off without it (DB_POOL_MAX=0,
# e.g. behind PgBouncer, whose transaction mode needs max_prepared_statements for them).
DB_PREPARED_STATEMENTS = env.bool(
    "DB_PREPARED_STATEMENTS", default=not EMBEDDED_DB and env.int("DB_POOL_MAX", default=10) > 0
)
if DB_PREPARED_STATEMENTS and not EMBEDDED_DB:
    # Django turns psycopg's preparing off (prepare_threshold None, which refuses even an explicit
    # prepare=True). Any number turns it on: prepared_cursor asks for prepare=True, and Django's
    # own cursors bind client-side and never prepare whatever the threshold.
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 5

REDIS_URL = env.str("REDIS_URL", default="")

# daphne is not an installed app: it would only swap in its `runserver`, and every process
# (smtpd, Celery) would import Twisted at start-up; the web process runs daphne itself
# (`python -m config.web`, `manage.py serve`).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "axes",
    "events",
    "apikeys",
    "inboxes",
    "mail",
    "labels",
    "outbox",
    "webhooks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.csp.DashboardCspMiddleware",
    # Last, as django-axes asks: turns a sign-in refused for too many failures into its page.
    "axes.middleware.AxesMiddleware",
]
# The REST API's chain (config.api.handler: every /api/ path no raw ASGI app takes) is the same
# less what serves pages only: static files (none under /api/), flash messages, the dashboard's
# CSP (it exempts /api/) and django-axes' lockout page (no password sign-in is under /api/).
# config.api.handler leaves these out of MIDDLEWARE when it loads its chain;
# tests/test_api_handler.py holds the API's answers through it equal to the full chain's.
PAGE_ONLY_MIDDLEWARE = (
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "config.csp.DashboardCspMiddleware",
    "axes.middleware.AxesMiddleware",
)

# django-axes first: it refuses to check a password while the account or address is locked out.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [TEMPLATES_DIR],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apikeys.context_processors.workspace",
                "outbox.context_processors.pending_approvals",
            ]
        },
    }
]

# Django's hashers, strongest first; an operator may put argon2 first (with argon2-cffi). The
# test suite puts a fast one first (tests/conftest.py): PBKDF2 is slow by design, and every user
# a test makes or signs in would pay for it.
PASSWORD_HASHERS = env.list(
    "PASSWORD_HASHERS",
    default=[
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
        "django.contrib.auth.hashers.Argon2PasswordHasher",
        "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
        "django.contrib.auth.hashers.ScryptPasswordHasher",
    ],
)
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [STATIC_DIR]
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": env.str("MEDIA_ROOT", default=str(VAR_DIR / "media"))},
    },
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# Files served at the site's root: /favicon.ico, which browsers ask for on every page without a
# <link rel=icon> (the admin, the API documentation) and which was a 404 in every log.
WHITENOISE_ROOT = STATIC_DIR / "root"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache, channel layer, jobs -------------------------------------------------------------
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "pgh",
        }
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "config.layers.PubSubLayer",  # channels_redis pub/sub + batches
            "CONFIG": {"hosts": [REDIS_URL], "prefix": "pgh"},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    # The hub (events.hub) holds a group as long as it has listeners and leaves it itself; the
    # layer's default expiry would drop a membership a day old (the key watch's, a busy inbox's).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"group_expiry": 100 * 365 * 86400},
        }
    }

CELERY_BROKER_URL = REDIS_URL or "memory://"
# Embedded mode runs tasks in-process; the test suite sets CELERY_TASK_ALWAYS_EAGER=true too.
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="pigeonhole")
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
# Beat's record of when each periodic job last ran (a shelve: one or more files). Celery's default
# is ./celerybeat-schedule*, which left files in the checkout; var/ is this instance's own state.
CELERY_BEAT_SCHEDULE_FILENAME = env.str(
    "BEAT_SCHEDULE_FILE", default=str(VAR_DIR / "celerybeat-schedule")
)

# --- Product settings ------------------------------------------------------------------------
INBOX_DOMAINS = [d.strip().lower() for d in env.list("INBOX_DOMAINS", default=["pigeonhole.test"])]
SMTP_PORT = env.int("SMTP_PORT", default=2525)
SMTP_HOSTNAME = env.str("SMTP_HOSTNAME", default=INBOX_DOMAINS[0] if INBOX_DOMAINS else "localhost")
MAX_MESSAGE_BYTES = env.int("MAX_MESSAGE_BYTES", default=26_214_400)
# Custom domains receive mail once a TXT record proves control (inboxes.verification).
# DNS_RESOLVER: host:port of the nameserver asked ("" = the system's resolver).
DNS_RESOLVER = env.str("DNS_RESOLVER", default="")
DNS_TIMEOUT = env.float("DNS_TIMEOUT", default=3.0)  # seconds one TXT lookup may take in all
# Authentication verdicts (SPF, DKIM, DMARC, ARC) of every message received over SMTP
# (mail/authentication): checked by the SMTP server between the end of DATA and the batch's
# commit, its DNS through DNS_RESOLVER with a cache. MAIL_AUTH_BUDGET bounds all of one
# message's lookups together (seconds); MAIL_AUTH_DNS_TIMEOUT one lookup. Off: no verdict (null).
MAIL_AUTH_CHECKS = env.bool("MAIL_AUTH_CHECKS", default=True)
MAIL_AUTH_BUDGET = env.float("MAIL_AUTH_BUDGET", default=2.0)
MAIL_AUTH_DNS_TIMEOUT = env.float("MAIL_AUTH_DNS_TIMEOUT", default=1.0)
# DKIM and ARC hash the whole body in the SMTP server's process, holding its interpreter: a message
# larger than this has its signatures listed but not verified (neutral).
MAIL_AUTH_MAX_BYTES = env.int("MAIL_AUTH_MAX_BYTES", default=1_048_576)
DOMAIN_RECHECK_MINUTES = env.int("DOMAIN_RECHECK_MINUTES", default=60)  # periodic re-check
# A verified domain whose record is missing this many checks in a row becomes unverified.
DOMAIN_UNVERIFY_AFTER = env.int("DOMAIN_UNVERIFY_AFTER", default=3)
# Local parts no workspace may take on the shared domains: RFC 2142's role addresses and those
# certificate authorities mail to prove control of a domain.
_RESERVED = "postmaster,hostmaster,webmaster,admin,administrator,ssl-admin,abuse,security,noc,"
_RESERVED += "root,mailer-daemon,noreply,no-reply,support,info"
RESERVED_LOCAL_PARTS = [
    part.strip().lower()
    for part in env.list("RESERVED_LOCAL_PARTS", default=_RESERVED.split(","))
    if part.strip()
]
# An SMTP session that sends nothing for this long is closed (RFC 5321 4.5.3.2.7: 5 minutes).
SMTP_IDLE_TIMEOUT = env.float("SMTP_IDLE_TIMEOUT", default=300.0)
# Who writes the smtpd's batches of mail (mail/smtpd/writer.py): on PostgreSQL one process shared
# by the host's smtpds (shared; mail/smtpd/shared.py) or one next to each smtpd (process); a
# thread of the smtpd in embedded mode (SQLite has one writer).
SMTP_WRITER = env.str("SMTP_WRITER", default="thread" if EMBEDDED_DB else "shared")
# Where the shared writer's socket and lock file live (a directory only this user may enter);
# empty: $XDG_RUNTIME_DIR/pigeonhole, else <tmp>/pigeonhole-<uid>.
SMTP_WRITER_DIR = env.str("SMTP_WRITER_DIR", default="")
# TLS of the SMTP receiver: a PEM certificate (chain) and its key. Set: STARTTLS is offered on
# SMTP_PORT, and SMTPS_PORT (unset: off) takes implicit TLS. Unset: no STARTTLS, except in
# embedded mode (manage.py serve), which makes a self-signed pair under var/tls/ at first start.
SMTP_TLS_CERT = env.str("SMTP_TLS_CERT", default="")
SMTP_TLS_KEY = env.str("SMTP_TLS_KEY", default="")
SMTPS_PORT = env.int("SMTPS_PORT", default=None)
# Concurrent SMTP sessions per client IP address; the next one gets 421 and is closed.
SMTP_MAX_CONNECTIONS_PER_IP = env.int("SMTP_MAX_CONNECTIONS_PER_IP", default=50)
# SMTP AUTH with an inbox's sandbox credentials (mail/smtpd/auth.py): offered only over TLS
# (STARTTLS or SMTPS_PORT) unless this allows it in plain text, as embedded mode does for local
# development. Failed AUTHs are counted per client IP and per username; past the limit within
# the window, AUTH answers 454 4.7.0 until the window ends.
SMTP_AUTH_ALLOW_PLAINTEXT = env.bool("SMTP_AUTH_ALLOW_PLAINTEXT", default=EMBEDDED_DB)
SMTP_AUTH_FAILURE_LIMIT = env.int("SMTP_AUTH_FAILURE_LIMIT", default=10)
SMTP_AUTH_FAILURE_WINDOW = env.int("SMTP_AUTH_FAILURE_WINDOW", default=900)  # seconds
# Largest API request body. The biggest documented body (send: text up to 1,000,000 and html up
# to 2,000,000 characters) is 18 MB at six bytes a character (JSON \u escapes); larger bodies
# get 413 payload_too_large.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("API_MAX_BODY_BYTES", default=20 * 1024 * 1024)
RATE_LIMIT_PER_MINUTE = env.int("RATE_LIMIT_PER_MINUTE", default=600)
# The web process's garbage-collector thresholds (config/asgi.py: gc.set_threshold): young,
# middle, old. Python's defaults (700, 10, 10) promote the objects of every request in flight to
# the old generation, and with hundreds of parked waits (an MCP call holds about 200 KB of
# objects) the full collections that follow stalled every answer for 50-150 ms several times a
# minute. 5,000 young objects keep a young collection to a few ms (50,000 made each one as long
# as a full one), and an old threshold of 100 makes full collections rare (docs/operations.md).
WEB_GC_THRESHOLDS = tuple(
    int(n) for n in env.list("WEB_GC_THRESHOLDS", default=["5000", "10", "100"])
)
if len(WEB_GC_THRESHOLDS) != 3 or min(WEB_GC_THRESHOLDS) < 1:
    raise ImproperlyConfigured("WEB_GC_THRESHOLDS: three positive integers, e.g. 5000,10,100")
# Open streams and waits (wait, stream, outbox ?wait=) one key or session may hold at once, across
# every web process; the next one gets 429 rate_limited.
MAX_OPEN_STREAMS_PER_KEY = env.int("MAX_OPEN_STREAMS_PER_KEY", default=100)
# Every user-supplied regular expression (config/patterns.py): one search stops after
# PATTERN_TIMEOUT_MS; all searches of one unit of work (a wait, one email's label rules, one
# tester run) after PATTERN_BUDGET_MS together. A stopped search counts as no match.
PATTERN_TIMEOUT_MS = env.int("PATTERN_TIMEOUT_MS", default=50)
PATTERN_BUDGET_MS = env.int("PATTERN_BUDGET_MS", default=250)
# A list filtered by ``q`` (mail.selectors.search_time_limit): its database work stops after this
# long with a 400 on ``q`` (unindexed terms such as header: read every email of a workspace).
SEARCH_TIMEOUT_MS = env.int("SEARCH_TIMEOUT_MS", default=3000)
WEBHOOK_ALLOW_PRIVATE_TARGETS = env.bool("WEBHOOK_ALLOW_PRIVATE_TARGETS", default=EMBEDDED_DB)
WEBHOOK_RETRY_SCHEDULE = [
    int(s) for s in env.list("WEBHOOK_RETRY_SCHEDULE", default=["10", "40", "180", "660", "2580"])
]
WEBHOOK_TIMEOUT = env.float("WEBHOOK_TIMEOUT", default=10.0)  # total seconds of one attempt
# The sweeper queues a due delivery again once its task had this long to arrive (a killed worker
# takes its task with it), and at most once per this many seconds.
WEBHOOK_SWEEP_GRACE = env.float("WEBHOOK_SWEEP_GRACE", default=10.0)
WEBHOOK_SWEEP_EVERY = env.float("WEBHOOK_SWEEP_EVERY", default=2.0)  # seconds between sweeps
OUTBOX_APPROVAL_HOURS = env.int("OUTBOX_APPROVAL_HOURS", default=72)
# How long a delivery attempt holds its outbox item: a worker killed mid-attempt leaves it to
# another after this long. Longer than any attempt can take (see EMAIL_TIMEOUT).
OUTBOX_LEASE_SECONDS = env.int("OUTBOX_LEASE_SECONDS", default=120)
# Seconds before each retry of a transient relay failure (±10 %); one more attempt than steps,
# then the item is failed. Sweeps and their grace work as the webhook ones (config/work.py).
OUTBOX_RETRY_SCHEDULE = [
    int(s) for s in env.list("OUTBOX_RETRY_SCHEDULE", default=["30", "120", "600", "1800", "7200"])
]
OUTBOX_SWEEP_GRACE = env.float("OUTBOX_SWEEP_GRACE", default=10.0)
OUTBOX_SWEEP_EVERY = env.float("OUTBOX_SWEEP_EVERY", default=15.0)  # seconds between sweeps
# Retention (mail.services.retention_sweep): expired inboxes past their workspace's grace, then
# mail past its workspace's maximum age, deleted RETENTION_CHUNK emails per transaction (the
# inbox locks held for one chunk's DELETE, never the whole purge), resting RETENTION_PAUSE times
# as long as each chunk took before the next (the sweep's share of the database is about
# 1 / (1 + RETENTION_PAUSE)), for at most RETENTION_SWEEP_SECONDS per run (the rest waits).
RETENTION_SWEEP_EVERY = env.float("RETENTION_SWEEP_EVERY", default=300.0)
RETENTION_SWEEP_SECONDS = env.float("RETENTION_SWEEP_SECONDS", default=240.0)
RETENTION_CHUNK = env.int("RETENTION_CHUNK", default=500)
RETENTION_PAUSE = env.float("RETENTION_PAUSE", default=3.0)
# The periodic jobs: run by Celery beat (the Procfile's beat) and, in embedded mode, by
# `manage.py serve` in-process. A setting rather than code in config/celery.py, which Celery reads
# through config_from_object: importing the Celery app then reads no settings, so a program can
# import the project (config.server) and set the environment before the settings are loaded.
CELERY_BEAT_SCHEDULE = {
    "expire-inboxes": {"task": "inboxes.expire_due", "schedule": 30.0},
    "prune-events": {"task": "events.prune", "schedule": 600.0},
    # Each workspace's audit_retention_days (apikeys.audit.prune), in batches.
    "prune-audit-log": {"task": "apikeys.prune_audit", "schedule": 3600.0},
    "announce-overdue-emails": {"task": "mail.announce_overdue", "schedule": 15.0},
    "sweep-webhook-deliveries": {"task": "webhooks.sweep", "schedule": WEBHOOK_SWEEP_EVERY},
    "sweep-outbox-deliveries": {"task": "outbox.sweep", "schedule": OUTBOX_SWEEP_EVERY},
    "expire-pending-outbox": {"task": "outbox.expire_pending", "schedule": 300.0},
    # Each run checks the custom domains due (DOMAIN_RECHECK_MINUTES), at most 100.
    "recheck-domains": {"task": "inboxes.recheck_domains", "schedule": 60.0},
    "retention-sweep": {"task": "mail.retention_sweep", "schedule": RETENTION_SWEEP_EVERY},
}
EVENT_RETENTION_HOURS = env.int("EVENT_RETENTION_HOURS", default=24)
CLASSIFIER_URL = env.str("CLASSIFIER_URL", default="")
CLASSIFIER_MODEL = env.str("CLASSIFIER_MODEL", default="")
CLASSIFIER_API_KEY = env.str("CLASSIFIER_API_KEY", default="")
CLASSIFIER_TIMEOUT = env.float("CLASSIFIER_TIMEOUT", default=5.0)  # email.received waits this long
CLASSIFIER_REQUEST_TIMEOUT = env.float("CLASSIFIER_REQUEST_TIMEOUT", default=30.0)  # late answers
# The tenant guard (config.tenancy): queries of workspace-owned models without a workspace filter
# raise. On in the test suite and the processes it starts; off in production.
TENANT_GUARD = env.bool("TENANT_GUARD", default=False)

# People join a workspace by invitation (apikeys): the link works once and for this long.
INVITATION_TTL_HOURS = env.int("INVITATION_TTL_HOURS", default=72)

# Failed sign-ins (/login/, /admin/login/) are limited per account and per client address by
# django-axes, counted in the database (every web process sees the same counts). After
# LOGIN_FAILURE_LIMIT failures within LOGIN_LOCKOUT_MINUTES, further sign-ins of that account,
# or from that address, are refused until the period has passed without failures; an operator
# unlocks at once with `manage.py axes_reset_username EMAIL` or `axes_reset_ip ADDRESS`.
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("LOGIN_LOCKOUT_MINUTES", default=15.0))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own, not the pair
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_USERNAME_CALLABLE = "apikeys.signin.username"
AXES_CLIENT_IP_CALLABLE = "apikeys.signin.client_address"
AXES_LOCKOUT_CALLABLE = "apikeys.signin.locked_out"
# A successful sign-in does not wipe the failures: the per-address count would otherwise be
# reset by an attacker signing in to an account of their own between guesses.
AXES_RESET_ON_SUCCESS = False
AXES_ENABLE_ACCESS_FAILURE_LOG = False
AXES_DISABLE_ACCESS_LOG = True  # sign-ins are not the product's log

# Outbound mail: EMAIL_URL (smtp://host:port) unless EMAIL_BACKEND names another backend (SES).
_email = env.email_url("EMAIL_URL", default="smtp://localhost:25")
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default=_email["EMAIL_BACKEND"])
EMAIL_HOST = _email.get("EMAIL_HOST", "localhost")
EMAIL_PORT = _email.get("EMAIL_PORT", 25)
EMAIL_HOST_USER = _email.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = _email.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _email.get("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _email.get("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT", default=30.0)  # seconds per SMTP operation
# System mail (invitations) comes from this address.
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default=f"pigeonhole@{SMTP_HOSTNAME}")
_relay_named = env.str("EMAIL_URL", default="") or env.str("EMAIL_BACKEND", default="")
# Invitation links are mailed when a relay is configured (EMAIL_URL or EMAIL_BACKEND set);
# without one the inviter passes the link on (it is shown once either way).
INVITATION_MAIL = env.bool("INVITATION_MAIL", default=bool(_relay_named))
# Embedded mode with no relay configured (neither EMAIL_URL nor EMAIL_BACKEND): mail for other
# domains is captured, kept with its item and shown in the dashboard as captured, never sent to
# the default relay (nothing listens on localhost:25 on a laptop) and never reported delivered.
OUTBOX_CAPTURE = env.bool("OUTBOX_CAPTURE", default=EMBEDDED_DB and not _relay_named)
# Amazon SES through django-ses (EMAIL_BACKEND=django_ses.SESBackend).
AWS_SES_REGION_NAME = env.str("AWS_SES_REGION_NAME", default="us-east-1")
AWS_SES_REGION_ENDPOINT = env.str(
    "AWS_SES_REGION_ENDPOINT", default=f"email.{AWS_SES_REGION_NAME}.amazonaws.com"
)
AWS_SES_REGION_ENDPOINT_URL = env.str(
    "AWS_SES_REGION_ENDPOINT_URL", default=f"https://{AWS_SES_REGION_ENDPOINT}"
)
AWS_ACCESS_KEY_ID = env.str("AWS_ACCESS_KEY_ID", default="") or None
AWS_SECRET_ACCESS_KEY = env.str("AWS_SECRET_ACCESS_KEY", default="") or None

# --- Security ----------------------------------------------------------------------------------
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env.bool("BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- API -------------------------------------------------------------------------------------
# Requests of the REST API one web process serves at once (config.api.handler's thread pool);
# each holds a connection of the database pool (DB_POOL_MAX) while it runs.
API_THREADS = env.int("API_THREADS", default=4)
# While requests queue, an API thread keeps its pooled connection for the next one, for at most
# this long from its checkout (config.api.handler); 0 gives it back after every request.
API_CONNECTION_SECONDS = env.float("API_CONNECTION_SECONDS", default=300.0)
# How often each web process checks the keys of its open waits and streams in any case
# (apikeys.watch); a change of a key or workspace wakes the check at once.
KEY_WATCH_SECONDS = env.float("KEY_WATCH_SECONDS", default=0.25)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apikeys.authentication.BearerKeyAuthentication",
        "apikeys.authentication.WorkspaceSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "apikeys.permissions.HasScope",
        "config.api.query.KnownQueryOnly",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["apikeys.throttling.KeyRateThrottle"],
    "DEFAULT_RENDERER_CLASSES": ["config.api.renderers.JsonRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "config.api.renderers.JsonNegotiation",
    "DEFAULT_PARSER_CLASSES": ["config.api.parsers.JsonParser"],
    "EXCEPTION_HANDLER": "config.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "config.api.schema.ScopedAutoSchema",
    "UNAUTHENTICATED_USER": None,
    # Responses are always JSON: ``?format=`` is no parameter of ours and, like any unknown
    # name, a validation_error (config.api.query) rather than DRF's renderer switch.
    "URL_FORMAT_OVERRIDE": None,
}

SYSTEM_FONTS = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
SPECTACULAR_SETTINGS = {
    "TITLE": "Pigeonhole API",
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",
    "DESCRIPTION": (CONFIG_DIR / "api" / "description.md").read_text(),
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    # Docstrings are written for maintainers (a base class's note once described twelve request
    # bodies); what a client reads is given explicitly: extend_schema's summary and description,
    # fields' help_text (tests/test_openapi_docs.py).
    "DISABLE_DOCSTRING_DESCRIPTIONS": True,
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "COMPONENT_SPLIT_PATCH": False,
    "ENUM_NAME_OVERRIDES": {
        "KeyKindEnum": "apikeys.models.KeyKind",
        "LinkKindEnum": ["verify", "login", "reset", "unsubscribe", "other"],
        "OutboxDeliveryStateEnum": "outbox.models.DELIVERY_STATE_NAMES",
    },
    "APPEND_COMPONENTS": {},
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "mail.schema.add_streaming_paths",
        "webhooks.schema.add_webhooks",
    ],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The system's fonts: the docs page loads nothing from outside (templates/api/redoc.html).
    "REDOC_UI_SETTINGS": {
        "theme": {
            "typography": {
                "fontFamily": SYSTEM_FONTS,
                "headings": {"fontFamily": SYSTEM_FONTS},
            }
        }
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "mail.log": {"level": "WARNING"},  # aiosmtpd logs every SMTP command at INFO
        "httpx": {"level": "WARNING"},  # every webhook request otherwise
        "axes": {"level": "WARNING"},  # every sign-in otherwise; failures and lockouts stay
    },
}
