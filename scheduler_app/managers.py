"""Domain operations on proxies and their histories.

Views call exactly one of these. The heartbeat is the hot path: one
conditional UPDATE with named fields, plus one INSERT when it carries a pool
summary; only a ``meta_patch`` (rare: sent when the proxy's meta changed)
takes a row lock to merge.
"""

from django.db import transaction

from controlplane.endpoints.managers import LivenessManager


class ProxyManager(LivenessManager):
    """Proxies; touch, unregister, sweep and delete_expired come from LivenessManager."""

    def register(self, *, proxy_id, pool_resource, now, **fields):
        """Create or refresh a proxy (SPEC 6).

        ``fields`` are the other register fields (host, port, endpoints, …);
        a known id gets them all replaced but keeps ``registered_at``, its
        load and, when ``pool_resource`` is None, its previous summary.
        """
        summary = summary_fields(pool_resource, now)

        def refresh(proxy):
            for name, value in {**fields, **summary}.items():
                setattr(proxy, name, value)

        with transaction.atomic():
            proxy = self.create_or_refresh(proxy_id, now, {**fields, **summary}, refresh)
            self._record_summary(proxy_id, pool_resource, now)
        return proxy

    def heartbeat(self, proxy_id, now, load=None, meta_patch=None, pool_resource=None):
        """Refresh a proxy; False when the id is unknown.

        ``load`` holds only the load fields the proxy sent (SPEC 12: the
        others keep their values); ``meta_patch`` is merged into meta;
        ``pool_resource`` None keeps the previous summary.
        """
        fields = {**(load or {}), **summary_fields(pool_resource, now)}
        if not meta_patch and pool_resource is None:
            return self.touch(proxy_id, now, "heartbeat", **fields)
        with transaction.atomic():
            if meta_patch:
                meta = self.select_for_update().filter(pk=proxy_id).values_list("meta", flat=True).first()
                if meta is None:
                    return False
                fields["meta"] = {**meta, **meta_patch}
            if not self.touch(proxy_id, now, "heartbeat", **fields):
                return False
            self._record_summary(proxy_id, pool_resource, now)
        return True

    def _record_summary(self, proxy_id, pool_resource, now):
        if pool_resource is not None:
            self.model.record_summary(proxy_id, pool_resource, now)


def summary_fields(pool_resource, now):
    """The Proxy columns a received summary sets; none when it is absent."""
    if pool_resource is None:
        return {}
    return {"pool_resource": pool_resource, "pool_resource_reported_at": now}
