"""Key pairs: generated or imported keys, their fingerprints, and their rows, as Nova keeps them.

A generated ssh key is a 2048-bit RSA key (the private key in the traditional PEM form, the public
key ``ssh-rsa … Generated-by-Nova``); a generated x509 key pair is a self-signed client certificate
for ``CN=<user>`` valid ten years, with the private key and certificate returned as a base64 PKCS#12
bundle. Fingerprints: MD5 of the ssh key blob, SHA-1 of the certificate, as colon-separated hex.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib

from sqlalchemy import and_, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from openkeel_compute import errors
from openkeel_compute.db import models

KEY_PAIRS = models.KEY_PAIRS
SSH = "ssh"
X509 = "x509"


class KeypairNotFound(errors.NotFound):
    def __init__(self, name: str, user_id: str):
        super().__init__(f"Keypair {name} not found for user {user_id}")


class KeyPairExists(errors.Conflict):
    def __init__(self, name: str):
        super().__init__(f"Key pair '{name}' already exists.")


class InvalidKeypair(errors.Invalid):
    def __init__(self, reason: str):
        super().__init__(f"Keypair data is invalid: {reason}")


class MarkerNotFound(errors.Invalid):
    def __init__(self, marker: str):
        super().__init__(f"Marker {marker} could not be found.")


def _colons(hexdigest: str) -> str:
    return ":".join(hexdigest[i:i + 2] for i in range(0, len(hexdigest), 2))


def ssh_fingerprint(public_key: str) -> str:
    from cryptography.hazmat.primitives import serialization

    try:
        serialization.load_ssh_public_key(public_key.encode("utf-8"))
        blob = base64.b64decode(public_key.split(" ")[1])
        return _colons(hashlib.md5(blob, usedforsecurity=False).hexdigest())
    except Exception:  # noqa: BLE001 - any unreadable key is the same 400, as in Nova
        raise InvalidKeypair("failed to generate fingerprint") from None


def x509_fingerprint(pem: str) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    try:
        cert = x509.load_pem_x509_certificate(pem.encode("utf-8") if isinstance(pem, str) else pem)
        return _colons(binascii.hexlify(cert.fingerprint(hashes.SHA1())).decode("ascii"))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise InvalidKeypair(f"failed to generate X509 fingerprint. Error message: {exc}") from None


def fingerprint(public_key: str, key_type: str) -> str:
    return x509_fingerprint(public_key) if key_type == X509 else ssh_fingerprint(public_key)


def generate_ssh(bits: int = 2048) -> tuple[str, str, str]:
    """(private key PEM, public key line, fingerprint)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode("ascii")
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode("ascii")
    public = f"{public} Generated-by-Nova"
    return private, public, ssh_fingerprint(public)


# Windows' user principal name (UPN) other-name type, as WinRM certificate authentication reads it.
_UPN_OID = "1.3.6.1.4.1.311.20.2.3"


def _der_utf8(text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) < 128:
        return b"\x0c" + bytes([len(data)]) + data
    length = len(data).to_bytes((len(data).bit_length() + 7) // 8, "big")
    return b"\x0c" + bytes([0x80 | len(length)]) + length + data


def generate_x509(user_id: str, bits: int = 2048) -> tuple[str, str, str]:
    """(base64 PKCS#12 of key and certificate, certificate PEM, fingerprint)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user_id)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(
            [x509.OtherName(x509.ObjectIdentifier(_UPN_OID), _der_utf8(f"{user_id}@localhost"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    bundle = pkcs12.serialize_key_and_certificates(None, key, cert, None, serialization.NoEncryption())
    return base64.b64encode(bundle).decode("ascii"), pem, x509_fingerprint(pem)


def _row(row) -> dict:
    return dict(row._mapping)


def get(conn, user_id: str, name: str) -> dict:
    row = conn.execute(select(KEY_PAIRS).where(and_(KEY_PAIRS.c.user_id == user_id,
                                                    KEY_PAIRS.c.name == name))).first()
    if row is None:
        raise KeypairNotFound(name, user_id)
    return _row(row)


def list_for_user(conn, user_id: str, limit: int | None = None, marker: str | None = None) -> list[dict]:
    query = select(KEY_PAIRS).where(KEY_PAIRS.c.user_id == user_id)
    if marker is not None:
        found = conn.execute(select(KEY_PAIRS.c.id).where(and_(KEY_PAIRS.c.user_id == user_id,
                                                                KEY_PAIRS.c.name == marker))).first()
        if found is None:
            raise MarkerNotFound(marker)
        query = query.where(KEY_PAIRS.c.name > marker)
    query = query.order_by(KEY_PAIRS.c.name.asc(), KEY_PAIRS.c.id.asc())
    if limit is not None:
        query = query.limit(limit)
    return [_row(r) for r in conn.execute(query)]


def count_for_user(conn, user_id: str) -> int:
    return conn.execute(select(func.count()).select_from(KEY_PAIRS).where(KEY_PAIRS.c.user_id == user_id)).scalar()


def create(conn, user_id: str, name: str, key_type: str, public_key: str, fp: str) -> dict:
    values = {"user_id": user_id, "name": name, "type": key_type, "public_key": public_key,
              "fingerprint": fp, "created_at": models.utcnow(), "updated_at": None}
    try:
        with conn.begin_nested():
            result = conn.execute(insert(KEY_PAIRS).values(**values))
    except IntegrityError:
        raise KeyPairExists(name) from None
    values["id"] = result.inserted_primary_key[0]
    return values


def destroy(conn, user_id: str, name: str) -> None:
    result = conn.execute(delete(KEY_PAIRS).where(and_(KEY_PAIRS.c.user_id == user_id, KEY_PAIRS.c.name == name)))
    if result.rowcount == 0:
        raise KeypairNotFound(name, user_id)
