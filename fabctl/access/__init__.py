"""`fabctl access`: who can do what on a rendered site, offline (docs/security.md)."""
