"""enode URLs: ``enode://<128 hex digits of the node's public key>@host:port``.

The public key is the 64-byte uncompressed secp256k1 key without its 0x04 prefix (what
RLPx and devp2p Hello carry). A ``?discport=N`` query (geth prints one) is accepted and
ignored: this project only speaks TCP.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from waku_legacy.crypto.secp256k1 import uncompressed_public_key
from waku_legacy.errors import CryptoError, DecodeError

__all__ = ["Enode", "EnodeError"]

_ENODE = re.compile(
    r"enode://(?P<key>[0-9a-fA-F]{128})@(?P<host>\[[0-9a-fA-F:.]+\]|[^:/?\[\]@]+)"
    r":(?P<port>\d{1,5})(?:\?(?P<query>[^#]*))?"
)


class EnodeError(DecodeError):
    """An enode URL that does not parse or names an invalid key."""


@dataclass(frozen=True, slots=True)
class Enode:
    public_key: bytes  # 64 bytes, X || Y
    host: str
    port: int

    def __post_init__(self) -> None:
        if len(self.public_key) != 64:
            raise EnodeError("enode", f"public key must be 64 bytes, got {len(self.public_key)}")
        try:
            uncompressed_public_key(self.public_key)
        except CryptoError as exc:
            raise EnodeError("enode", "public key is not a point on secp256k1") from exc
        if not 0 < self.port < 65536:
            raise EnodeError("enode", f"port {self.port} is out of range 1..65535")

    @classmethod
    def parse(cls, url: str) -> Enode:
        match = _ENODE.fullmatch(url.strip())
        if match is None:
            raise EnodeError("enode URL", f"{url!r} is not enode://<128 hex digits>@host:port")
        host = match["host"]
        if host.startswith("["):
            host = host[1:-1]
            try:
                ipaddress.IPv6Address(host)
            except ValueError as exc:
                raise EnodeError("enode URL", f"{host!r} is not an IPv6 address") from exc
        return cls(bytes.fromhex(match["key"]), host, int(match["port"]))

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"enode://{self.public_key.hex()}@{host}:{self.port}"
