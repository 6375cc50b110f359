"""Fleetwatch settings: read from environment variables only (SPEC 11).

Every default runs on a fresh clone: SQLite in WAL mode under ``var/``,
django-q2 with the ORM broker, both roles in one process.
"""

from pathlib import Path

from controlplane.env import (
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_json_object,
    env_list,
    env_str,
    secret_key_from_file,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("FLEETWATCH_VAR_DIR", str(BASE_DIR / "var")))

# From the environment, else generated once into var/secret_key (never a fixed default).
SECRET_KEY = env_str("DJANGO_SECRET_KEY") or secret_key_from_file(VAR_DIR / "secret_key")
DEBUG = env_bool("DJANGO_DEBUG", False)
# Loopback by default; `up` adds the address it advertises. Set the names
# clients use (DJANGO_ALLOWED_HOSTS=pool-a.example,10.0.0.5) for any other.
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
if env_str("FLEETWATCH_ADVERTISE_HOST") and env_str("FLEETWATCH_ADVERTISE_HOST") not in ALLOWED_HOSTS:
    ALLOWED_HOSTS.append(env_str("FLEETWATCH_ADVERTISE_HOST"))

# Served over TLS by a reverse proxy (docs/security.md): secure cookies, HSTS,
# and a redirect to https for the pages. The API paths are not redirected:
# agents and proxies post to them and a redirect would lose the body.
FLEETWATCH_TLS = env_bool("FLEETWATCH_TLS", False)
if FLEETWATCH_TLS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^v1/", r"^debug/", r"^healthz$", r"^metrics$", r"^api/"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("FLEETWATCH_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("FLEETWATCH_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("FLEETWATCH_HSTS_PRELOAD", True)

# --- roles and control-plane behaviour -------------------------------------
FLEETWATCH_ROLES = env_list("FLEETWATCH_ROLES", ["proxy", "scheduler"])
# Token auth (SPEC 10): on unless set off. Writes without a token are also
# let in from these networks (CIDRs), for old clients that send none.
FLEETWATCH_AUTH = env_bool("FLEETWATCH_AUTH", True)
FLEETWATCH_TRUSTED_NETWORKS = env_list("FLEETWATCH_TRUSTED_NETWORKS", [])
# Writes per token and instance id per window; 0 switches the limit off.
FLEETWATCH_RATE_LIMIT = env_int("FLEETWATCH_RATE_LIMIT", 300)
FLEETWATCH_RATE_WINDOW_S = env_int("FLEETWATCH_RATE_WINDOW_S", 60)
FLEETWATCH_MAX_BODY_BYTES = env_int("FLEETWATCH_MAX_BODY_BYTES", 256 * 1024)

FLEETWATCH_INSTANCE_TTL_S = env_int("FLEETWATCH_INSTANCE_TTL_S", 30)
FLEETWATCH_PROXY_TTL_S = env_int("FLEETWATCH_PROXY_TTL_S", 30)
FLEETWATCH_PROXY_HEARTBEAT_S = env_float("FLEETWATCH_PROXY_HEARTBEAT_S", 5.0)
# Stale entries are shown with include_dead=true until this has passed.
FLEETWATCH_RETENTION_S = env_int("FLEETWATCH_RETENTION_S", 24 * 3600)
# Status-change records are kept this long.
FLEETWATCH_STATUS_HISTORY_S = env_int("FLEETWATCH_STATUS_HISTORY_S", 7 * 24 * 3600)
# Series (SPEC 9): full resolution for this long, then 1-minute rollups for this long.
FLEETWATCH_HISTORY_FULL_S = env_int("FLEETWATCH_HISTORY_FULL_S", 15 * 60)
FLEETWATCH_HISTORY_MINUTES_S = env_int("FLEETWATCH_HISTORY_MINUTES_S", 24 * 3600)
# How often the Proxy's recorder writes a PoolResource row and the instance series.
FLEETWATCH_SERIES_INTERVAL_S = env_float("FLEETWATCH_SERIES_INTERVAL_S", 1.0)

FLEETWATCH_PROXY_ID = env_str("FLEETWATCH_PROXY_ID", "")
FLEETWATCH_SCHEDULER_URL = env_str("FLEETWATCH_SCHEDULER_URL", "")
# The proxy-scope token the link presents to the Scheduler (`up` makes one itself).
FLEETWATCH_SCHEDULER_TOKEN = env_str("FLEETWATCH_SCHEDULER_TOKEN", "")
# The address this Proxy registers with the Scheduler. Empty/0: the address
# `manage.py up` listens on (127.0.0.1:8000 outside `up`).
FLEETWATCH_ADVERTISE_HOST = env_str("FLEETWATCH_ADVERTISE_HOST", "")
FLEETWATCH_ADVERTISE_PORT = env_int("FLEETWATCH_ADVERTISE_PORT", 0)
# granian worker processes started by `up`; 0: one per CPU, at most 8.
FLEETWATCH_WEB_WORKERS = env_int("FLEETWATCH_WEB_WORKERS", 0)
# The share of each web process's time placement and feedback may take (issue 30): beyond it a 429 with
# Retry-After, so a routing flood leaves the rest to the agents' reports (1: no limit; docs/placement.md).
FLEETWATCH_ROUTE_SHARE = env_float("FLEETWATCH_ROUTE_SHARE", 0.25)
# The route listener `up` starts beside the web processes (issue 30, docs/placement.md): processes of their own
# for the routers, at a lower CPU priority, so a routing flood never shares a GIL or a core's turn with the
# agents' reports. Unset: the web port + 1 (left out, with a warning, when that port is taken); 0: none.
FLEETWATCH_ROUTE_PORT = env_int("FLEETWATCH_ROUTE_PORT", None)
FLEETWATCH_ROUTE_WORKERS = env_int("FLEETWATCH_ROUTE_WORKERS", 1)
# Its niceness (nice(1)): 10 gives the web processes about nine times its share of a busy core.
FLEETWATCH_ROUTE_NICE = env_int("FLEETWATCH_ROUTE_NICE", 10)

# Requests each worker answers at once (granian's blocking threads): the reports that arrive together
# share one commit (controlplane/api/group_commit.py; docs/scale-out.md says why this many).
FLEETWATCH_WEB_THREADS = env_int("FLEETWATCH_WEB_THREADS", 8)
# What the web server `up` starts holds (docs/security.md): connections waiting to be
# accepted (the kernel caps it at net.core.somaxconn), open connections per worker, and
# seconds a connection may take to send its headers or sit idle between requests (at most 60).
FLEETWATCH_WEB_BACKLOG = env_int("FLEETWATCH_WEB_BACKLOG", 4096)
FLEETWATCH_WEB_CONNECTIONS = env_int("FLEETWATCH_WEB_CONNECTIONS", 8192)
FLEETWATCH_WEB_HEADER_TIMEOUT_S = env_int("FLEETWATCH_WEB_HEADER_TIMEOUT_S", 10)
# How long ``up`` waits for its processes to stop, all at once, before it kills them
# (a service manager's own grace period should be longer: systemd's default is 90 s).
FLEETWATCH_STOP_GRACE_S = env_float("FLEETWATCH_STOP_GRACE_S", 20.0)
# The pool's capacity for its load_ratio. Unset (or 0) means none declared, one thing everywhere (issue 47): the
# summary's capacity is 0 (SPEC 5), load_ratio is null, the link declares no max_capacity and the pages say
# "capacity not configured". A default figure made a load ratio about nothing (1190 with 200 hosts busy).
FLEETWATCH_PROXY_CAPACITY = env_int("FLEETWATCH_PROXY_CAPACITY", 0)
# Where `up`'s own local agent listens, set by `up` for its web server (the agent page names it).
FLEETWATCH_UP_AGENT_LISTEN = env_str("FLEETWATCH_UP_AGENT_LISTEN")
# Whether a capacity is declared (the link tells the Scheduler, whose pages then say so).
FLEETWATCH_PROXY_CAPACITY_CONFIGURED = FLEETWATCH_PROXY_CAPACITY > 0
# An instance's engine saturation (SPEC 13): min(1, max(waiting / W, kv usage / K)).
FLEETWATCH_SATURATION_WAITING = env_float("FLEETWATCH_SATURATION_WAITING", 5.0)
FLEETWATCH_SATURATION_KV = env_float("FLEETWATCH_SATURATION_KV", 0.8)
# Placement and fencing (SPEC 14, docs/placement.md).
FLEETWATCH_PLACEMENT_MAX_AGE_S = env_float("FLEETWATCH_PLACEMENT_MAX_AGE_S", 2.0)
FLEETWATCH_PLACEMENT_SHED_PRESSURE = env_float("FLEETWATCH_PLACEMENT_SHED_PRESSURE", 2.0)
# How old a web process's placement board may get before a request refreshes it
# from the rows changed since (0: every request reads the database afresh).
FLEETWATCH_PLACEMENT_REFRESH_S = env_float("FLEETWATCH_PLACEMENT_REFRESH_S", 0.25)
FLEETWATCH_FENCE_ERRORS = env_int("FLEETWATCH_FENCE_ERRORS", 3)
FLEETWATCH_FENCE_RECOVERY_S = env_float("FLEETWATCH_FENCE_RECOVERY_S", 10.0)
# Cache-aware placement (SPEC 15, docs/placement.md): the pool's block size B in tokens (agent/prefix_keys.py's
# default), how long learned mode counts a placed prompt as cached, and the body limit of the two paths that
# carry prompts or keys (a 128k-token prompt as token ids; a prefix_blocks body's 2 × 16,384 keys).
FLEETWATCH_PREFIX_BLOCK_TOKENS = env_int("FLEETWATCH_PREFIX_BLOCK_TOKENS", 16)
FLEETWATCH_PREFIX_LEARNED_TTL_S = env_float("FLEETWATCH_PREFIX_LEARNED_TTL_S", 120.0)
FLEETWATCH_PREFIX_MAX_BODY_BYTES = env_int("FLEETWATCH_PREFIX_MAX_BODY_BYTES", 1024 * 1024)
# Text and chat prompts (SPEC 16, docs/placement.md, "Text and chat"): the operator's tokenizers
# ({model id: directory}, before any an agent offers), a chat template's time per render, and each
# process's cache of tokenized segments.
FLEETWATCH_TOKENIZERS = env_json_object("FLEETWATCH_TOKENIZERS")
FLEETWATCH_TEMPLATE_TIMEOUT_MS = env_float("FLEETWATCH_TEMPLATE_TIMEOUT_MS", 50.0)
FLEETWATCH_TOKENIZER_CACHE_MB = env_float("FLEETWATCH_TOKENIZER_CACHE_MB", 64.0)
# How often each process looks for tokenizers the agents stored (SPEC 16.2: used everywhere within 5 s).
FLEETWATCH_TOKENIZER_REFRESH_S = env_float("FLEETWATCH_TOKENIZER_REFRESH_S", 2.0)
# Tokenizers (SPEC 16.2, docs/tokenizers.md): whether the agents' offered tokenizer files are taken and stored, and
# the body limit of one file's upload (PUT /v1/instance/tokenizer/<sha256>; SPEC 16.2's 64 MiB at most).
FLEETWATCH_TOKENIZERS_FROM_AGENTS = env_bool("FLEETWATCH_TOKENIZERS_FROM_AGENTS", True)
FLEETWATCH_TOKENIZER_MAX_BODY_BYTES = 64 * 1024 * 1024  # not from the environment: the contract's bound

# --- Django -----------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_q",
    "controlplane",
    "proxy_app",
    "scheduler_app",
]

MIDDLEWARE = [
    "controlplane.ops.metrics.RequestMetricsMiddleware",
    "controlplane.api.outage.DatabaseRecoveryMiddleware",
    "controlplane.api.middleware.BodySizeLimitMiddleware",
    # Before anything reads the query, a form or a cookie: PostgreSQL refuses NUL.
    "controlplane.api.middleware.NulCharacterMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Cheap without a cookie, and what the deployment check looks for by name.
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Below: for pages and the admin only; an API call without a session
    # cookie passes them by (controlplane/api/middleware.py, "the API lane").
    "controlplane.api.middleware.ApiLaneMiddleware",
    "controlplane.api.middleware.WhiteNoiseMiddleware",
    "controlplane.api.middleware.AuthenticationMiddleware",
    "controlplane.api.middleware.MessageMiddleware",
    "controlplane.api.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # The dashboards' filters and tags, kept with the rest of the pages' parts.
            "libraries": {"fleetwatch": "controlplane.pages.templatetags"},
        },
    },
]

DATABASES = {
    "default": database_from_url(
        env_str("DATABASE_URL", "sqlite:///" + str(VAR_DIR / "fleetwatch.sqlite3")),
        BASE_DIR,
        conn_max_age=env_int("FLEETWATCH_CONN_MAX_AGE", 300),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The body limit is enforced by BodySizeLimitMiddleware with the SPEC
# envelope; Django's own check is kept as a second line at the same size.
# (the larger of the two limits: a placement body may be larger, ``body_size_refusal``).
DATA_UPLOAD_MAX_MEMORY_SIZE = max(FLEETWATCH_MAX_BODY_BYTES, FLEETWATCH_PREFIX_MAX_BODY_BYTES)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# The dashboards' own stylesheet and scripts, and the vendored front-end
# libraries (with their licences): nothing is loaded from a CDN.
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise serves the admin's static files straight from the apps: no
# collectstatic step, nothing to configure on a fresh clone.
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["controlplane.api.renderers.ORJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["controlplane.api.parsers.StrictJSONParser"],
    "EXCEPTION_HANDLER": "controlplane.api.errors.envelope_exception_handler",
    # The API's own authentication wherever a view names none (the schema and its docs page among them): DRF's
    # default would take HTTP Basic, a user's password checked (PBKDF2) on every try, with no rate limit.
    "DEFAULT_AUTHENTICATION_CLASSES": ["controlplane.api.auth.BearerTokenAuthentication",
                                       "controlplane.api.auth.StaffSessionAuthentication"],
    "UNAUTHENTICATED_USER": None,
    "STRICT_JSON": True,
    "COERCE_DECIMAL_TO_STRING": False,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# OpenAPI 3 at /api/schema/, browsable at /api/docs/ from the sidecar's static files (no CDN).
SPECTACULAR_SETTINGS = {
    "TITLE": "Fleetwatch API",
    "DESCRIPTION": "Resource-aware control plane for LLM-serving fleets: the Proxy and Scheduler APIs "
                   "(the CacheRoute wire contract, docs/contract.md).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# django-q2: the ORM broker by default; Redis when FLEETWATCH_REDIS_URL is set.
Q_CLUSTER = {
    "name": "fleetwatch",
    "workers": env_int("FLEETWATCH_Q_WORKERS", 2),
    "timeout": 60,
    "retry": 120,
    "catch_up": False,
    "max_attempts": 1,
    "ack_failures": True,
    "poll": 0.5,
    "orm": "default",
    # The ORM broker, waiting out a database outage instead of ending its pusher (controlplane/ops/task_broker.py).
    "broker_class": "controlplane.ops.task_broker.PatientORM",
    "log_level": "WARNING",
}
if env_str("FLEETWATCH_REDIS_URL"):
    Q_CLUSTER.pop("orm")
    Q_CLUSTER.pop("broker_class")
    Q_CLUSTER["redis"] = env_str("FLEETWATCH_REDIS_URL")

# The rate limiter's shared counters (controlplane/api/ratelimit.py): Redis when
# configured, else files every web process of this host shares.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "ratelimit": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": env_str("FLEETWATCH_REDIS_URL")}
        if env_str("FLEETWATCH_REDIS_URL") else
        {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(VAR_DIR / "ratelimit"),
         # Counters expire with their window; culling early would only forget live ones.
         "OPTIONS": {"MAX_ENTRIES": 1_000_000}}
    ),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # The process id: up's processes write to one stream.
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"}},
    "filters": {"one_line_warning": {"()": "controlplane.ops.logs.OneLineWarning"},
                "database_outage": {"()": "controlplane.ops.logs.DatabaseOutageFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("FLEETWATCH_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.server": {"level": "WARNING"},
        # A client's wrong Host: header is a 400 and one line, not an ERROR with a traceback.
        "django.security.DisallowedHost": {"filters": ["one_line_warning"]},
        # An outage as one warning, not a traceback per failed look (controlplane/ops/logs.py).
        "django-q": {"level": env_str("FLEETWATCH_Q_LOG_LEVEL", "WARNING"), "filters": ["database_outage"]},
    },
}
