"""The dashboards' shared parts (SPEC 8): who may look, how a page renders, lists, charts, formatting,
and the entry-dashboard kit both control planes declare their pages on (``kit``)."""
