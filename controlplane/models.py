"""Abstract model bases shared by both control planes."""

import orjson
from django.conf import settings
from django.db import models

from controlplane import clock, liveness, tokens
from controlplane.admission import Admission
from controlplane.liveness import ChangeReason, ChangeStatus, Status
from controlplane.managers import HistoryManager

# Ids, hosts and other short names sent by clients.
NAME_LENGTH = 255


class JSONTextField(models.TextField):
    """A JSON document kept as the text it arrived as: never queried inside, only stored and
    sent back, so no database parses it (PostgreSQL's jsonb parse was a large share of a
    snapshot's ingest) and a list can splice it into its answer unparsed. Python code
    still reads and writes it as a dict."""

    def from_db_value(self, value, expression, connection):
        return None if value is None else orjson.loads(value)

    def to_python(self, value):
        return orjson.loads(value) if isinstance(value, (str, bytes)) else value

    def get_prep_value(self, value):
        if value is None or isinstance(value, str):
            return value
        return orjson.dumps(value).decode()


class StatusChangeBase(models.Model):
    """One liveness transition of an entry (healthchecks' ``Flip``).

    Subclasses add the entry's id column under the entry's own primary-key
    name (``instance_id``, ``proxy_id``): a plain column, so the history
    outlives the entry.
    """

    old_status = models.CharField(max_length=16, blank=True, default="", choices=ChangeStatus.choices)
    new_status = models.CharField(max_length=16, choices=ChangeStatus.choices)
    reason = models.CharField(max_length=255, blank=True, default="", choices=ChangeReason.choices)
    at = models.FloatField(db_index=True, help_text="Epoch seconds of the moment the change happened.")

    objects = HistoryManager()

    class Meta:
        abstract = True
        ordering = ["-at", "-id"]


class RegisteredEndpoint(models.Model):
    """Something that registers, heartbeats and is judged alive by a TTL:
    an instance at its Proxy, a proxy at the Scheduler.

    Subclasses declare their primary key (the id clients send), the status
    change model that records their transitions (``status_change_model``, whose
    id column has the primary key's name), the setting that holds their TTL
    (``ttl_setting``) and ``heartbeat_interval_s()``.

    ``status`` is what the sweeper last recorded; reads compute liveness from
    ``last_seen_at`` (``controlplane.liveness``), so a late sweep never shows a
    dead entry as alive.
    """

    LOAD_FIELDS = ("inflight", "qps_1m", "gpu_util")

    host = models.CharField(max_length=NAME_LENGTH)
    port = models.PositiveIntegerField()
    endpoints = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=list, blank=True)
    weight = models.FloatField(default=1.0)
    meta = models.JSONField(default=dict, blank=True)
    # Load from heartbeats; null until the entry reports it.
    inflight = models.BigIntegerField(null=True, blank=True)
    qps_1m = models.FloatField(null=True, blank=True)
    gpu_util = models.FloatField(null=True, blank=True)
    registered_at = models.FloatField(help_text="Epoch seconds.")
    last_seen_at = models.FloatField(db_index=True, help_text="Epoch seconds, server receive time.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ALIVE)

    status_change_model = None
    ttl_setting = ""

    class Meta:
        abstract = True

    def __str__(self):
        return str(self.pk)

    @classmethod
    def ttl_s(cls):
        return getattr(settings, cls.ttl_setting)

    @classmethod
    def heartbeat_interval_s(cls):
        raise NotImplementedError

    @classmethod
    def record_change(cls, pk, old_status, new_status, reason, at):
        cls.status_change_model.objects.create(
            **{cls._meta.pk.name: pk}, old_status=old_status, new_status=new_status, reason=reason, at=at
        )

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    def is_alive(self, now):
        return liveness.is_alive(self.last_seen_at, now, self.ttl_s())

    def status_now(self, now):
        return liveness.status_at(self.last_seen_at, now, self.ttl_s(), self.heartbeat_interval_s())


# --- series (SPEC 9) ------------------------------------------------------------------


def minute_figures(names, kind=models.FloatField):
    """``<figure>_min``, ``_avg`` and ``_max`` columns of each figure, for a minute rollup model."""
    return {f"{name}_{agg}": kind(null=True, blank=True) for name in names for agg in ("min", "avg", "max")}


class PoolSeriesPoint(models.Model):
    """One pool summary at full resolution: the figures the charts draw, and the summary itself.

    ``t`` is epoch seconds like every time in this project; these rows live
    for the full-resolution window only (minutes), then survive as rollups.
    """

    t = models.FloatField(db_index=True, help_text="Epoch seconds.")
    alive = models.BigIntegerField(null=True, blank=True)
    total = models.BigIntegerField(null=True, blank=True)
    with_resource = models.BigIntegerField(null=True, blank=True)
    cpu_avg = models.FloatField(null=True, blank=True)
    memory_used_ratio = models.FloatField(null=True, blank=True)
    gpu_util_avg = models.FloatField(null=True, blank=True)
    gpu_mem_used_ratio = models.FloatField(null=True, blank=True)
    network_rx_mbps_total = models.FloatField(null=True, blank=True)
    network_tx_mbps_total = models.FloatField(null=True, blank=True)
    pool_admission_state = models.CharField(max_length=32, null=True, blank=True, choices=Admission.choices)
    summary = models.JSONField()

    FIGURES = ("alive", "total", "with_resource", "cpu_avg", "memory_used_ratio", "gpu_util_avg",
               "gpu_mem_used_ratio", "network_rx_mbps_total", "network_tx_mbps_total")
    ADMISSION = "pool_admission_state"

    class Meta:
        abstract = True
        ordering = ["-t"]


class MinuteRollup(models.Model):
    """One minute of a series folded into min/avg/max per figure (nulls ignored).

    ``minute`` is the minute's start; ``samples`` how many full-resolution
    rows it folded; the admission column holds the worst state of the minute.
    """

    minute = models.DateTimeField(db_index=True)
    samples = models.IntegerField()

    class Meta:
        abstract = True
        ordering = ["-minute"]


class PoolMinuteRollup(MinuteRollup):
    """A minute of a pool's summaries: ``alive_min``, ``alive_avg``, ``alive_max``, … per figure."""

    # A class body's namespace takes the generated columns like written-out ones.
    locals().update(minute_figures(PoolSeriesPoint.FIGURES))
    pool_admission_state = models.CharField(max_length=32, null=True, blank=True, choices=Admission.choices)

    FIGURES = PoolSeriesPoint.FIGURES
    ADMISSION = PoolSeriesPoint.ADMISSION

    class Meta(MinuteRollup.Meta):
        abstract = True


# --- API tokens (SPEC 10) ----------------------------------------------------------------


class ApiTokenManager(models.Manager):
    def issue(self, name, scope, instance_ids=(), now=None):
        """Create a token; returns ``(token, secret)``. The secret is shown once and never stored."""
        secret = tokens.new_secret()
        token = self.create(
            name=name, scope=scope, digest=tokens.digest(secret), hint=secret[:len(tokens.PREFIX) + 4],
            instance_ids=sorted(set(instance_ids)), created_at=clock.now() if now is None else now,
        )
        return token, secret

    def revoke(self, name, now=None):
        """Revoke the live token called ``name``; False when there is none."""
        return bool(self.filter(name=name, revoked_at=None).update(revoked_at=clock.now() if now is None else now))

    def grant_for(self, digest):
        """The Grant of a live token with this digest, or None (one indexed read)."""
        row = (self.filter(digest=digest, revoked_at=None)
               .values_list("pk", "name", "scope", "instance_ids").first())
        if row is None:
            return None
        pk, name, scope, instance_ids = row
        return tokens.Grant(pk, name, scope, frozenset(instance_ids or ()))

    def mark_used(self, token_id, now):
        self.filter(pk=token_id).update(last_used_at=now)


class ApiToken(models.Model):
    """A bearer token: stored as its SHA-256 only, named, scoped, revocable (SPEC 10)."""

    name = models.CharField(max_length=NAME_LENGTH)
    scope = models.CharField(max_length=16, choices=tokens.Scope.choices)
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token, hex.")
    hint = models.CharField(max_length=16, help_text="The token's first characters, to recognise it by.")
    # An instance token may be bound to these ids only; empty: any instance.
    instance_ids = models.JSONField(default=list, blank=True)
    created_at = models.FloatField(help_text="Epoch seconds.")
    last_used_at = models.FloatField(null=True, blank=True, help_text="Epoch seconds; written at most once a minute.")
    revoked_at = models.FloatField(null=True, blank=True, help_text="Epoch seconds.")

    objects = ApiTokenManager()

    class Meta:
        ordering = ["name", "-created_at"]
        verbose_name = "API token"
        constraints = [
            # A name means one live token; a revoked one leaves its name free for the next.
            models.UniqueConstraint(fields=["name"], condition=models.Q(revoked_at=None), name="api_token_live_name"),
        ]

    def __str__(self):
        return self.name

    @property
    def revoked(self):
        return self.revoked_at is not None
