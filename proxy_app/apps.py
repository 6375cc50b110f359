from django.apps import AppConfig


class ProxyAppConfig(AppConfig):
    name = "proxy_app"
    verbose_name = "Proxy: instances of this pool"
