"""The site schema's models, one module per domain (DESIGN section 4, "Config first").

`site.SiteSchema` puts their fields together (`components.config.site.SiteConfig` is the model to validate a site
with); `components.config` re-exports the domain models.
"""
