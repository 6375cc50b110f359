"""State of one pool: its instances, their latest resources, their status history."""

from django.db import models

from controlplane.endpoints import liveness
from controlplane.endpoints.admission import Admission
from controlplane.endpoints.models import NAME_LENGTH, JSONTextField, RegisteredEndpoint, status_change_model
from controlplane.series.models import (
    MinuteRollup,
    PoolMinuteRollup,
    PoolSeriesPoint,
    admission_column,
    figure,
    rollup_columns,
)
from proxy_app.managers import InstanceManager, SchedulerLinkStateManager

InstanceStatusChange = status_change_model("instance", __name__)


class Instance(RegisteredEndpoint):
    """One LLM-serving process registered with this proxy (SPEC 3)."""

    instance_id = models.CharField(max_length=NAME_LENGTH, primary_key=True)
    # The canonical form of the typed capabilities (SPEC 3.2) and its fingerprint.
    capabilities = models.JSONField(null=True, blank=True)
    capability_fingerprint = models.CharField(max_length=71, null=True, blank=True)
    # Fencing (SPEC 14.2, ``proxy_app.placement.fencing``): kept out of placement until it recovers.
    fenced = models.BooleanField(default=False)
    fence_reason = models.CharField(max_length=64, null=True, blank=True)
    fence_errors = models.IntegerField(default=0, help_text="Consecutive non-ok router outcomes.")
    fence_quiet_since = models.FloatField(null=True, blank=True, help_text="While fenced: clean since (epoch s).")
    had_ok_engine = models.BooleanField(default=False, help_text="Some report showed an ok engine.")
    fence_changed_at = models.FloatField(null=True, blank=True, db_index=True,
                                         help_text="Epoch seconds of the last change of the fence state.")
    # The routers' audit of cache-aware placement (SPEC 16.4): the prompt tokens the engine said it had cached
    # (its usage.prompt_tokens_details.cached_tokens), and those placement predicted for the same requests.
    cached_tokens_total = models.BigIntegerField(default=0)
    predicted_cached_tokens_total = models.BigIntegerField(default=0)

    status_change_model = InstanceStatusChange
    ttl_setting = "FLEETWATCH_INSTANCE_TTL_S"
    # Indexed with the id below instead of alone (see Meta.indexes).
    last_seen_at = models.FloatField(help_text="Epoch seconds, server receive time.")

    objects = InstanceManager()

    class Meta:
        ordering = ["instance_id"]
        indexes = [
            # The sweep walks entries by stored status and age.
            models.Index(fields=["status", "last_seen_at"], name="instance_status_seen"),
            # Liveness filters, covering the id: pool_resource joins the alive
            # instances to their resources without reading an instance row
            # (10,000 instances on SQLite: 36 → 25 ms).
            models.Index(fields=["last_seen_at", "instance_id"], name="instance_seen_id"),
        ]

    @classmethod
    def heartbeat_interval_s(cls):
        """The interval handed to instances on register: a third of the TTL, 1–10 s."""
        return liveness.heartbeat_interval_for_ttl(cls.ttl_s())

    @property
    def latest_resource(self):
        """The InstanceResource, or None before the first snapshot (no query when select_related)."""
        try:
            return self.resource
        except InstanceResource.DoesNotExist:
            return None

    @property
    def raw_resource(self):
        """The latest snapshot as sent; {} before the first (no query when select_related)."""
        try:
            return self.snapshot.raw_resource
        except InstanceSnapshot.DoesNotExist:
            return {}


class InstanceResource(models.Model):
    """The latest snapshot of an instance, normalised into columns (SPEC 3.1).

    Real columns so the pool's figures are read as narrow rows (the pool
    summary's columns, the lists): the snapshot as sent lives in
    ``InstanceSnapshot`` (with it here, a 6 KB row took a page of its own and a
    read of the pool's figures read 40 MB for 10,000 instances).
    A column is null where the snapshot did not say (``figure``), never 0.
    """

    instance = models.OneToOneField(
        Instance, primary_key=True, on_delete=models.CASCADE, related_name="resource"
    )
    cpu_util = figure()
    memory_used_mb = figure()
    memory_total_mb = figure()
    memory_free_mb = figure()
    memory_free_ratio = figure()
    gpu_count = figure(models.IntegerField)
    gpu_util_avg = figure()
    gpu_util_current = figure()
    gpu_util_max = figure()
    gpu_sample_count = figure(models.BigIntegerField)
    gpu_sample_age_ms = figure(models.BigIntegerField)
    gpu_sample_source = models.CharField(max_length=64, null=True, blank=True)
    gpu_sample_quality = models.CharField(max_length=32, null=True, blank=True)
    gpu_sample_window_ms = figure(models.BigIntegerField)
    gpu_mem_used_mb = figure()
    gpu_mem_total_mb = figure()
    # This project's own verdicts (the compat gpu_sample_* above mean what
    # they mean in the original): the weakest valid GPU's sample count, and
    # ok / partial / invalid over every GPU row.
    gpu_sample_count_min = figure(models.BigIntegerField)
    gpu_sample_coverage = models.CharField(max_length=16, null=True, blank=True)
    network_rx_mbps = figure()
    network_tx_mbps = figure()
    # The serving engines of the host (SPEC 13, ``proxy_app.ingest.engines``): queue and
    # KV figures sum or take the maximum over the ``ok`` engines only.
    engine_count = figure(models.IntegerField)
    engine_ok_count = figure(models.IntegerField)
    engine_status = models.CharField(max_length=32, null=True, blank=True)
    engine_models = JSONTextField(null=True, blank=True, help_text="Sorted, distinct model names (JSON list).")
    requests_running = figure(models.BigIntegerField)
    requests_waiting = figure(models.BigIntegerField)
    kv_cache_usage_ratio = figure()
    kv_cache_capacity_tokens = figure(models.BigIntegerField)
    ttft_p95_s = figure()
    engine_sample_age_ms = figure(models.BigIntegerField)
    engine_loras = JSONTextField(null=True, blank=True, help_text="Running LoRA adapters of the ok engines (JSON list).")
    gpu_error_count = figure(models.IntegerField, help_text="GPUs whose health is error.")
    # An agent's word: stored lower-cased as sent, so an unknown state is
    # kept rather than refused; the known ones are the Admission choices.
    admission_state = models.CharField(
        max_length=32, null=True, blank=True, db_index=True, choices=Admission.choices
    )
    resource_ts_ms = figure(models.BigIntegerField)
    resource_reported_at = figure()
    resource_report_monotonic_ms = figure(models.BigIntegerField)
    resource_report_wall_time_ms = figure(models.BigIntegerField)
    reported_instance_id = models.CharField(max_length=NAME_LENGTH, null=True, blank=True)
    agent_snapshot_timestamp_ms = figure(models.BigIntegerField)
    report_seq = figure(models.BigIntegerField)
    # False when the snapshot was an empty object: such an instance is alive
    # but not "reporting" (SPEC 5), and SQL cannot test JSON emptiness portably.
    has_raw_resource = models.BooleanField(default=False)
    # Engines whose KV-cache events the agent reads with status ok (SPEC 15.2): placement's cheap answer to
    # "does this instance publish its cache?" (``proxy_app.prefix``); not a SPEC 3.1 field, so not listed.
    kv_events_ok_count = figure(models.IntegerField)
    # The LoRA adapters the engines serve (SPEC 16.1, ``served`` entries with a parent): adapter id -> its base
    # model's id, so a body naming the adapter as its model is placed as parent + adapter; not listed either.
    adapter_parents = JSONTextField(null=True, blank=True, help_text="Served adapter id -> parent model id (JSON).")

    def __str__(self):
        return f"resource of {self.instance_id}"


class InstanceSnapshot(models.Model):
    """The latest snapshot of an instance exactly as its agent sent it (``raw_resource``, SPEC 3.1).

    Written with its InstanceResource (and skipped with it for a late report).
    """

    instance = models.OneToOneField(Instance, primary_key=True, on_delete=models.CASCADE, related_name="snapshot")
    raw_resource = JSONTextField(default=dict, blank=True)

    def __str__(self):
        return f"snapshot of {self.instance_id}"


class SchedulerLinkState(models.Model):
    """Last outcome of this proxy's link to the scheduler (SPEC 7).

    The link runs in its own process; it writes this row after every attempt
    so ``/debug/status`` in the web processes can show it.
    """

    proxy_id = models.CharField(max_length=NAME_LENGTH, primary_key=True)
    scheduler_url = models.CharField(max_length=1024)
    registered = models.BooleanField(default=False)
    heartbeat_interval_s = models.FloatField(null=True, blank=True)
    last_action = models.CharField(max_length=32, blank=True, default="")
    last_attempt_at = models.FloatField(null=True, blank=True)
    last_ok_at = models.FloatField(null=True, blank=True)
    last_error_at = models.FloatField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    consecutive_failures = models.IntegerField(default=0)

    objects = SchedulerLinkStateManager()


# --- the pool's prefix index (SPEC 15.4, ``proxy_app.prefix``) -------------------------------


class PrefixEngine(models.Model):
    """One engine of an instance whose cached blocks the index holds, and where its agent's stream stands.

    ``epoch`` and ``seq`` are the last body applied (SPEC 15.3); ``blocks`` how many keys it holds. Its rows
    leave with the instance (the cascade is what unregister and expiry delete: one place).
    """

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="prefix_engines")
    engine = models.CharField(max_length=256)
    epoch = models.BigIntegerField()
    seq = models.BigIntegerField()
    blocks = models.IntegerField(default=0)
    changed_at = models.FloatField(help_text="Epoch seconds of the last body applied.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["instance", "engine"], name="prefix_engine_once")]


class PrefixBlock(models.Model):
    """One key (SPEC 15.1) an engine holds: the durable copy every web process rebuilds its index from.

    ``slot`` is its ``PrefixEngine``'s id (no foreign key: unregister deletes by a direct cascade only,
    which the instance key gives). Looked up by key in memory only, so the one index is the unique one.
    """

    id = models.BigAutoField(primary_key=True)
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="prefix_blocks", db_index=False)
    slot = models.BigIntegerField()
    key = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["slot", "key"], name="prefix_block_once")]
        indexes = [models.Index(fields=["instance"], name="prefix_block_instance")]


class PrefixChange(models.Model):
    """One applied body, as the web processes' copies read it (``proxy_app.prefix.keeper``): kept for
    ``CHANGE_KEEP_S``, after which a copy that fell behind rebuilds from ``PrefixBlock``.

    ``added`` and ``removed`` are int64 arrays (little-endian bytes). No foreign key: a change outlives
    nothing it needs, and the copies learn of an instance's end from its status change.
    """

    id = models.BigAutoField(primary_key=True)
    instance_id = models.CharField(max_length=NAME_LENGTH)
    slot = models.BigIntegerField()
    engine = models.CharField(max_length=256)
    epoch = models.BigIntegerField()
    seq = models.BigIntegerField()
    reset = models.BooleanField(default=False)
    added = models.BinaryField()
    removed = models.BinaryField()
    at = models.FloatField(db_index=True)


class PrefixLearned(models.Model):
    """A prompt's keys placed on an instance where no engine publishes events (SPEC 15.5 learned mode)."""

    id = models.BigAutoField(primary_key=True)
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="prefix_learned")
    keys = models.BinaryField()
    at = models.FloatField(db_index=True)
    expires_at = models.FloatField(db_index=True)


# --- series (SPEC 9) -----------------------------------------------------------------


class InstanceSample(models.Model):
    """One instance at full resolution: the figures of one snapshot, copied by the recorder.

    Narrow on purpose (a row a second per instance for the window); no
    foreign key, so an instance's series outlives it until pruned.
    """

    instance_id = models.CharField(max_length=NAME_LENGTH)
    t = models.FloatField(db_index=True, help_text="Epoch seconds: when the Proxy received the snapshot.")
    cpu_util = figure()
    memory_used_ratio = figure()
    gpu_util_avg = figure()
    gpu_util_max = figure()
    gpu_mem_used_ratio = figure()
    network_rx_mbps = figure()
    network_tx_mbps = figure()
    requests_waiting = figure()
    requests_running = figure()
    kv_cache_usage_ratio = figure()
    admission_state = admission_column()

    FIGURES = ("cpu_util", "memory_used_ratio", "gpu_util_avg", "gpu_util_max", "gpu_mem_used_ratio",
               "network_rx_mbps", "network_tx_mbps", "requests_waiting", "requests_running", "kv_cache_usage_ratio")
    ADMISSION = "admission_state"

    class Meta:
        ordering = ["-t"]
        indexes = [models.Index(fields=["instance_id", "t"], name="instance_sample_id_t")]


@rollup_columns
class InstanceMinute(MinuteRollup):
    """One minute of one instance: min/avg/max of each figure, the worst admission state."""

    instance_id = models.CharField(max_length=NAME_LENGTH)

    FIGURES = InstanceSample.FIGURES
    ADMISSION = InstanceSample.ADMISSION

    class Meta(MinuteRollup.Meta):
        constraints = [models.UniqueConstraint(fields=["instance_id", "minute"], name="instance_minute_once")]


class PoolResource(PoolSeriesPoint):
    """This pool's summary, materialised every second by the recorder (``manage.py run_recorder``).

    Readers that can live with a second of staleness read the newest row
    instead of aggregating the pool; ``/debug/pool_resource`` stays fresh.
    """


class PoolResourceMinute(PoolMinuteRollup):
    """One minute of this pool's summaries."""

    class Meta(PoolMinuteRollup.Meta):
        constraints = [models.UniqueConstraint(fields=["minute"], name="pool_resource_minute_once")]


class TokenizerFile(models.Model):
    """One tokenizer file an agent uploaded (SPEC 16.2), stored once by its content's SHA-256.

    Checked against its digest before it is stored, so a row's bytes are
    always the digest's; the same file offered by a thousand instances (or
    for several models) is one row.
    """

    sha256 = models.CharField(max_length=64, primary_key=True)
    content = models.BinaryField()
    size = models.BigIntegerField()
    stored_at = models.FloatField(db_index=True)

    def __str__(self):
        return f"{self.sha256[:12]} ({self.size} bytes)"


class TokenizerOffer(models.Model):
    """What one instance's agent offered as a model's tokenizer: ``files`` ``{name: sha256}`` (SPEC 16.2).

    One row per instance and model, replaced by each offer; the newest offer
    of a model whose every file is stored is the pool's tokenizer for it
    (``proxy_app.tokenizers.store.agent_sets``). ``load_error`` is what
    loading that set last said (null: it loaded, or was not tried).
    """

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="tokenizer_offers")
    model = models.CharField(max_length=255)
    files = JSONTextField(help_text="File name -> SHA-256 of its content (JSON object).")
    offered_at = models.FloatField(db_index=True)
    load_error = models.TextField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["instance", "model"], name="tokenizer_offer_per_model")]

    def __str__(self):
        return f"{self.model} from {self.instance_id}"
