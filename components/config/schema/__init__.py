"""The site schema's models, one module per domain (DESIGN section 4, "Config first").

`components.config.site.SiteConfig` puts them together; `components.config` re-exports them all.
"""
