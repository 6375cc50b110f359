"""Capabilities in the original's canonical form: empty objects and lists are kept.

Before this, the canonical form dropped empty members, so for any object
that was not a full pydantic dump the stored fingerprint differed from the
one the original Instance computes, and its every fingerprint heartbeat was
told ``capability_fingerprint_mismatch``. Recomputing the stored form and
fingerprint here heals such instances on their next beat.
"""

from django.db import migrations

from agent.capabilities import CapabilityError, fingerprint, parse_capabilities

BATCH = 500


def recompute_canonical_capabilities(apps, schema_editor):
    Instance = apps.get_model("proxy_app", "Instance")
    changed = []
    # Read whole before writing: SQLite gives no isolation between a batched read and writes to its table.
    stored = list(Instance.objects.exclude(capabilities=None).only("pk", "capabilities", "capability_fingerprint"))
    for instance in stored:
        try:
            canonical = parse_capabilities(instance.capabilities)
        except CapabilityError:  # nothing stored by 0003 or later fails, but never stop an upgrade on it
            canonical = None
        if canonical != instance.capabilities or fingerprint(canonical) != instance.capability_fingerprint:
            instance.capabilities, instance.capability_fingerprint = canonical, fingerprint(canonical)
            changed.append(instance)
        if len(changed) >= BATCH:
            Instance.objects.bulk_update(changed, ["capabilities", "capability_fingerprint"])
            changed = []
    if changed:
        Instance.objects.bulk_update(changed, ["capabilities", "capability_fingerprint"])


class Migration(migrations.Migration):

    dependencies = [
        ("proxy_app", "0008_pool_series_network"),
    ]

    operations = [
        migrations.RunPython(recompute_canonical_capabilities, migrations.RunPython.noop),
    ]
