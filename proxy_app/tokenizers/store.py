"""The tokenizer files agents offer (SPEC 16.2 (b)), on the database: written by the two instance endpoints,
read by every web process.

The writes (``proxy_app.api.tokenizers``):

1. ``offer(instance_id, model, files, now)``: the instance's offer for the
   model replaces its earlier one; the answer is the digests not stored yet
   (None: the instance is unknown). With ``FLEETWATCH_TOKENIZERS_FROM_AGENTS``
   off nothing is stored and nothing is missing.
2. ``put_file(sha256, data, now)``: stores a file some offer names, once,
   after checking its bytes against the digest.

The reads, for the tokenizer registry each web process keeps:

- ``agent_sets()``: ``{model: {name: sha256}}``, each model's newest offer
  whose every file is stored;
- ``file_bytes(sha256)``: a stored file's bytes, or None;
- ``changed_marker()``: one cheap query whose answer changes whenever an
  offer or a file is added, replaced or removed: poll it (every ≤ 5 s) and
  read ``agent_sets`` again only when it changed;
- ``record_error(model, sha256, text)``: what loading a set said, shown by
  the admin (None clears it).
"""

import enum

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from proxy_app.models import Instance, TokenizerFile, TokenizerOffer
from proxy_app.tokenizers.files import sha256_of

MAX_ERROR_LENGTH = 2000


class Stored(enum.Enum):
    STORED = "stored"
    ALREADY = "already"  # the same content was stored before: nothing to do
    NOT_OFFERED = "not_offered"  # no offer names this digest
    MISMATCH = "mismatch"  # the bytes' SHA-256 is not the digest


def offer(instance_id, model, files, now):
    """Record an instance's offer of a model's ``files``; the sorted digests the Proxy lacks, or None when the
    instance is unknown."""
    if not Instance.objects.filter(pk=instance_id).exists():
        return None
    if not settings.FLEETWATCH_TOKENIZERS_FROM_AGENTS:
        return []
    TokenizerOffer.objects.update_or_create(instance_id=instance_id, model=model,
                                            defaults={"files": files, "offered_at": now, "load_error": None})
    digests = set(files.values())
    stored = set(TokenizerFile.objects.filter(sha256__in=digests).values_list("sha256", flat=True))
    return sorted(digests - stored)


def is_offered(sha256) -> bool:
    """Whether some offer names the digest (a text match inside the offers' JSON: digests are 64 hex
    characters, so one cannot match inside another or a file name)."""
    return TokenizerOffer.objects.filter(files__contains=f'"{sha256}"').exists()


def put_file(sha256, data, now) -> Stored:
    """Store ``data`` as the file ``sha256`` names, once, if some offer names it and the bytes match it."""
    if not settings.FLEETWATCH_TOKENIZERS_FROM_AGENTS or not is_offered(sha256):
        return Stored.NOT_OFFERED
    if sha256_of(data) != sha256:
        return Stored.MISMATCH
    if TokenizerFile.objects.filter(pk=sha256).exists():
        return Stored.ALREADY
    try:
        with transaction.atomic():
            TokenizerFile.objects.create(sha256=sha256, content=data, size=len(data), stored_at=now)
    except IntegrityError:  # another agent's upload of the same file committed first
        return Stored.ALREADY
    return Stored.STORED


def agent_sets():
    """``{model: {name: sha256}}``: each model's newest offer whose every file is stored."""
    offers = list(TokenizerOffer.objects.order_by("-offered_at", "instance_id").values_list("model", "files"))
    digests = {digest for _, files in offers for digest in files.values()}
    stored = set(TokenizerFile.objects.filter(sha256__in=digests).values_list("sha256", flat=True))
    sets = {}
    for model, files in offers:
        if model not in sets and files and set(files.values()) <= stored:
            sets[model] = dict(files)
    return sets


def file_bytes(sha256):
    """A stored file's bytes, or None."""
    content = TokenizerFile.objects.filter(pk=sha256).values_list("content", flat=True).first()
    return None if content is None else bytes(content)


def changed_marker():
    """A tuple that changes whenever an offer or a stored file is added, replaced or removed: one query of
    counts and newest times (an offer again, even of the same files, moves it too)."""
    offers = connection.ops.quote_name(TokenizerOffer._meta.db_table)
    files = connection.ops.quote_name(TokenizerFile._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT COUNT(*) FROM {offers}), (SELECT MAX(offered_at) FROM {offers}), "
            f"(SELECT COUNT(*) FROM {files}), (SELECT MAX(stored_at) FROM {files})")
        return tuple(cursor.fetchone())


def record_error(model, sha256, text):
    """Keep what loading ``model``'s tokenizer (the offers naming ``sha256``) said; None clears it."""
    text = None if text is None else str(text)[:MAX_ERROR_LENGTH]
    TokenizerOffer.objects.filter(model=model, files__contains=f'"{sha256}"').exclude(load_error=text).update(
        load_error=text)
