"""The site's CA beside the public CAs, for clients whose whole process trusts one store (JVMs, libcurl).

`-Djavax.net.ssl.trustStore` replaces a JVM's default `cacerts`, and a CA file mounted over the image's system bundle
replaces the distribution's CAs: such a client that only trusted the site's CA would lose the public endpoints it may
still call (an external database with a public certificate, a peer site's object store). Both stores here hold the
public CAs of the pinned certifi (Mozilla's list) and the site's CA, in a stable order, so the same inputs give the same
bytes and the ConfigMaps that carry them do not change on every update. `trust_store` makes such a Java store of any
certificates (also the registry's and the site's CA alone, for Spark's JVMs: engines/_spark_packages.py, _spark_trust.py).
"""

from __future__ import annotations

import warnings

import certifi

JVM_TRUST_STORE_KEY = "jvm-truststore.p12"
"""The key of the PKCS#12 store (public CAs and the site's) in the ConfigMaps that carry it."""
CA_FILE_KEY = "ca-certificates.crt"
"""The key of the PEM bundle (public CAs and the site's) in the ConfigMaps that carry it."""


def _der_length(data: bytes, at: int) -> tuple[int, int]:
    """The length of the DER element whose length octets start at `at`, and where its content starts."""
    first = data[at]
    if first < 0x80:
        return first, at + 1
    count = first & 0x7F
    return int.from_bytes(data[at + 1:at + 1 + count], "big"), at + 1 + count


def _der_sequence(content: bytes) -> bytes:
    size = len(content)
    length = bytes([size]) if size < 0x80 else bytes([0x80 | ((size.bit_length() + 7) // 8)]) + size.to_bytes((size.bit_length() + 7) // 8, "big")
    return b"\x30" + length + content


def _without_mac(pfx: bytes) -> bytes:
    """A PKCS#12 file (PFX: version, authSafe, macData) without its integrity MAC, whose salt is random: with no password
    the MAC proves nothing, and without it the same certificates always give the same file. Java reads such a file."""
    _, start = _der_length(pfx, 1)
    kept, at = [], start
    for _ in range(2):  # version and authSafe
        length, content = _der_length(pfx, at + 1)
        kept.append(pfx[at:content + length])
        at = content + length
    return _der_sequence(b"".join(kept))


def trust_store(pem: str) -> bytes:
    """A PKCS#12 Java trust store of the certificates of `pem`: no password, as it holds public certificates only, and no
    MAC, so that the same certificates give the same bytes and the ConfigMap does not change on every update."""
    # Imported here: only a site whose JVMs trust its own CA builds a store, and cryptography costs every render ~25 ms.
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import NoEncryption, pkcs12

    with warnings.catch_warnings():
        # Mozilla's bundle (the public CAs some stores hold) has a root with a negative serial number (RFC 5280 says
        # positive), which cryptography still reads, with a deprecation warning on every render; Java reads it too.
        warnings.filterwarnings("ignore", message="Parsed a serial number which wasn't positive")
        certificates = x509.load_pem_x509_certificates(pem.encode())
    entries = [pkcs12.PKCS12Certificate(cert, f"fab-registry-ca-{i}".encode()) for i, cert in enumerate(certificates)]
    return _without_mac(pkcs12.serialize_java_truststore(entries, NoEncryption()))


def public_cas() -> str:
    """Mozilla's CA bundle as the pinned certifi ships it (PEM, ending with a newline)."""
    public = certifi.contents()
    return public if public.endswith("\n") else f"{public}\n"


def public_and_site_pem(site_pem: str) -> str:
    """The public CAs of the pinned certifi, then the site's CA bundle (PEM)."""
    return public_cas() + site_pem


def public_and_site_store(site_pem: str) -> bytes:
    """A password-less PKCS#12 Java trust store of the public CAs and the site's."""
    return trust_store(public_and_site_pem(site_pem))


def jvm_trust_options(path: str) -> list[str]:
    """The JVM options that make the store at `path` the JVM's default trust (JSSE `javax.net.ssl.trustStore`)."""
    return [f"-Djavax.net.ssl.trustStore={path}", "-Djavax.net.ssl.trustStoreType=PKCS12"]
