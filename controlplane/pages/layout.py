"""What every page renders with: the base layout's context, the HTML 404, links to entries, ``/``."""

from urllib.parse import quote

from django.conf import settings
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import RFC3986_SUBDELIMS


def layout_context(request):
    """What ``base.html`` needs: the roles this process serves (for the navigation)."""
    roles = settings.FLEETWATCH_ROLES
    return {
        "serves_proxy": "proxy" in roles,
        "serves_scheduler": "scheduler" in roles,
        "auth_on": bool(settings.FLEETWATCH_AUTH),
    }


def render_page(request, template, context, status=200):
    return render(request, template, {**layout_context(request), **context}, status=status)


def not_found_page(request, what, name):
    """The HTML 404 of a dashboard page: ``what`` ("instance", "proxy") ``name`` is not known here."""
    return render_page(request, "404.html", {"what": what, "name": name}, status=404)


def id_url(name):
    """``reverse(name, args=[id])`` for many ids at the cost of one ``reverse``.

    A list page links every row to its entry's page; reversing a ``<path:>``
    route for each row cost as much as the rest of the row. The id is quoted
    exactly as ``reverse`` quotes it.
    """
    marker = "ID-PLACEHOLDER"
    prefix, _, suffix = reverse(name, args=[marker]).partition(marker)
    safe = RFC3986_SUBDELIMS + "/~:@"
    return lambda entry_id: f"{prefix}{quote(str(entry_id), safe=safe)}{suffix}"


def home(request):
    """``/`` (SPEC 8): the fleet when this process is the Scheduler, else its own pool.

    Only a redirect: the page it leads to decides who may look.
    """
    return redirect("fleet" if "scheduler" in settings.FLEETWATCH_ROLES else "pool")
