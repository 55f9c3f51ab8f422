"""The site's CA beside the public CAs, for clients whose whole process trusts one store (JVMs, libcurl).

`-Djavax.net.ssl.trustStore` replaces a JVM's default `cacerts`, and a CA file mounted over the image's system bundle
replaces the distribution's CAs: such a client that only trusted the site's CA would lose the public endpoints it may
still call (an external database with a public certificate, a peer site's object store). Both stores here hold the
public CAs of the pinned certifi (Mozilla's list) and the site's CA, in a stable order, so the same inputs give the same
bytes and the ConfigMaps that carry them do not change on every update.
"""

from __future__ import annotations

import certifi

JVM_TRUST_STORE_KEY = "jvm-truststore.p12"
"""The key of the PKCS#12 store (public CAs and the site's) in the ConfigMaps that carry it."""
CA_FILE_KEY = "ca-certificates.crt"
"""The key of the PEM bundle (public CAs and the site's) in the ConfigMaps that carry it."""


def public_cas() -> str:
    """Mozilla's CA bundle as the pinned certifi ships it (PEM, ending with a newline)."""
    public = certifi.contents()
    return public if public.endswith("\n") else f"{public}\n"


def public_and_site_pem(site_pem: str) -> str:
    """The public CAs of the pinned certifi, then the site's CA bundle (PEM)."""
    return public_cas() + site_pem


def public_and_site_store(site_pem: str) -> bytes:
    """A password-less PKCS#12 Java trust store of the public CAs and the site's."""
    # Imported here: the engines' package imports what imports this module.
    from components.engines._spark_packages import trust_store

    return trust_store(public_and_site_pem(site_pem))


def jvm_trust_options(path: str) -> list[str]:
    """The JVM options that make the store at `path` the JVM's default trust (JSSE `javax.net.ssl.trustStore`)."""
    return [f"-Djavax.net.ssl.trustStore={path}", "-Djavax.net.ssl.trustStoreType=PKCS12"]
