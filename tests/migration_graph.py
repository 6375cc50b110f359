"""Names from the migrations on disk, so tests that step an app back do not hard-code its newest migration."""

from django.db.migrations.loader import MigrationLoader


def newest_and_parent(app_label):
    """The name of ``app_label``'s newest migration and of the one before it."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    (newest,) = [node for node in graph.leaf_nodes() if node[0] == app_label]
    (parent,) = [node for node in graph.node_map[newest].parents if node[0] == app_label]
    return newest[1], parent[1]
