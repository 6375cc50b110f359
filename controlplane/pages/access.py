"""Who may see a dashboard page (SPEC 8): the one access rule.

With ``FLEETWATCH_AUTH`` on, a page (and every fragment or JSON view it
polls) needs a logged-in staff user; off, anyone may look.
``staff_always=True`` asks for staff whatever the setting (pages that act on
the host). Whoever may not look is sent to the admin login page: a browser
navigation with a 302, a script request (htmx or the chart loader, both send
``HX-Request``) with an ``HX-Redirect`` header, so the whole page goes there
rather than a login form landing inside a table.
"""

from functools import wraps
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect


def may_look(user, staff_only):
    """Whether ``user`` may see a page: anyone when auth is off (unless ``staff_only``), else active staff."""
    if not (settings.FLEETWATCH_AUTH or staff_only):
        return True
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def login_redirect(request):
    """Off to the admin login page, coming back to the page the user was on."""
    login_url = reverse("admin:login")
    if request.headers.get("HX-Request"):
        back_to = request.headers.get("HX-Current-URL") or request.get_full_path()
        current = getattr(request, "htmx", None)
        if current and current.current_url_abs_path:
            back_to = current.current_url_abs_path
        return HttpResponseClientRedirect(f"{login_url}?next={quote(back_to, safe='/')}")
    return redirect_to_login(request.get_full_path(), login_url)


def dashboard_page(view=None, *, staff_always=False):
    """Decorate a page view, or a fragment/JSON view a page polls, with the dashboards' access rule."""

    def decorate(view_func):
        @wraps(view_func)
        def guarded(request, *args, **kwargs):
            if not may_look(request.user, staff_always):
                return login_redirect(request)
            return view_func(request, *args, **kwargs)

        guarded.dashboard_staff_always = staff_always
        return guarded

    return decorate(view) if view is not None else decorate
