"""API tokens in the admin: created here as with ``create_token``, shown once, revoked, never edited."""

from django import forms
from django.contrib import admin, messages
from django.db import IntegrityError

from controlplane import clock
from controlplane.api.tokens import ApiToken, Scope
from controlplane.clock import date_and_age
from controlplane.figures import MISSING


class NewTokenForm(forms.ModelForm):
    instance_ids_text = forms.CharField(
        label="Instance ids", required=False,
        help_text="Comma-separated; binds an instance token to these ids. Empty: any instance.",
    )

    class Meta:
        model = ApiToken
        fields = ("name", "scope")

    def clean(self):
        cleaned = super().clean()
        ids = [part.strip() for part in cleaned.get("instance_ids_text", "").split(",") if part.strip()]
        if ids and cleaned.get("scope") != Scope.INSTANCE:
            raise forms.ValidationError("Only instance tokens are bound to instance ids.")
        cleaned["instance_ids"] = ids
        if ApiToken.objects.filter(name=cleaned.get("name"), revoked_at=None).exists():
            raise forms.ValidationError("A live token already has this name; revoke it first or pick another.")
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "scope", "starts_with", "bound_to", "created", "last_used", "revoked_when")
    list_filter = ("scope", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("name",)
    actions = ["revoke"]

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = NewTokenForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("name", "scope", "instance_ids_text")
        return ("name", "scope", "starts_with", "bound_to", "created", "last_used", "revoked_when")

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.get_fields(request, obj)

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return False  # revoke instead: the row keeps when it was used

    def save_model(self, request, obj, form, change):
        try:
            token, secret = ApiToken.objects.issue(form.cleaned_data["name"], form.cleaned_data["scope"],
                                                   form.cleaned_data["instance_ids"])
        except IntegrityError:
            messages.error(request, "A live token already has this name.")
            return
        obj.pk = token.pk
        messages.warning(request, f"The new token {token.name!r}, shown this once: {secret}")

    def response_add(self, request, obj, post_url_continue=None):
        return self.response_post_save_add(request, obj)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at=None).update(revoked_at=clock.now())
        messages.success(request, f"Revoked {count} token(s); every process refuses them within a few seconds.")

    @admin.display(description="starts with")
    def starts_with(self, obj):
        return f"{obj.hint}…"

    @admin.display(description="instance ids")
    def bound_to(self, obj):
        return ", ".join(obj.instance_ids) or "any"

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return date_and_age(obj.created_at)

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, obj):
        return date_and_age(obj.last_used_at)

    @admin.display(description="revoked", ordering="revoked_at")
    def revoked_when(self, obj):
        return date_and_age(obj.revoked_at) if obj.revoked else MISSING
