"""The model bases of everything that registers and heartbeats (instances, proxies)."""

import orjson
from django.conf import settings
from django.db import models

from controlplane.endpoints import liveness
from controlplane.endpoints.liveness import ChangeReason, ChangeStatus, Status
from controlplane.endpoints.managers import HistoryManager

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

    Made for each kind of entry by ``status_change_model``, which adds the
    entry's id column under the entry's own primary-key name (``instance_id``,
    ``proxy_id``): a plain column, so the history outlives the entry.
    """

    entry_id_column = ""  # the name of that column

    old_status = models.CharField(max_length=16, blank=True, default="", choices=ChangeStatus.choices)
    new_status = models.CharField(max_length=16, choices=ChangeStatus.choices)
    reason = models.CharField(max_length=255, blank=True, default="", choices=ChangeReason.choices)
    at = models.FloatField(db_index=True, help_text="Epoch seconds of the moment the change happened.")

    objects = HistoryManager()

    class Meta:
        abstract = True
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{getattr(self, self.entry_id_column)}: {self.old_status or '-'} → {self.new_status}"


def status_change_model(entry, module):
    """``<Entry>StatusChange`` of the app ``module``: the transitions of an ``entry`` ("instance", "proxy").

    Its id column is ``<entry>_id``, the entry's primary-key name, indexed.
    """
    id_column = f"{entry}_id"
    return type(f"{entry.capitalize()}StatusChange", (StatusChangeBase,), {
        "__module__": module,
        "__doc__": f"A liveness transition of one {entry}; kept after the {entry} is deleted.",
        "entry_id_column": id_column,
        id_column: models.CharField(max_length=NAME_LENGTH, db_index=True),
    })


class RegisteredEndpoint(models.Model):
    """Something that registers, heartbeats and is judged alive by a TTL:
    an instance at its Proxy, a proxy at the Scheduler.

    Subclasses declare their primary key (the id clients send), the status
    change model that records their transitions (``status_change_model``, whose
    id column has the primary key's name), the setting that holds their TTL
    (``ttl_setting``) and ``heartbeat_interval_s()``.

    ``status`` is what the sweeper last recorded; reads compute liveness from
    ``last_seen_at`` (``controlplane.endpoints.liveness``), so a late sweep never shows a
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
