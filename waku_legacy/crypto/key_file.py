"""Node key files, as geth's ``nodekey``: the 32-byte secp256k1 private key as 64 hex
digits on one line (a trailing newline and surrounding whitespace are tolerated)."""

from __future__ import annotations

import os
from pathlib import Path

import coincurve

from waku_legacy.crypto.secp256k1 import generate_private_key, private_key_from_bytes
from waku_legacy.durable import write_atomic
from waku_legacy.errors import ConfigError, CryptoError
from waku_legacy.files import MAX_KEY_FILE, read_small_text

__all__ = ["load_node_key", "load_or_create_node_key", "write_node_key"]


def load_node_key(
    path: str | os.PathLike[str], *, what: str = "node key file"
) -> coincurve.PrivateKey:
    """The key in ``path``; errors name the file as ``what`` (a community key file is not
    a node key file to the operator reading the message)."""
    file = Path(path)
    # A regular file of at most MAX_KEY_FILE bytes: /dev/zero or a huge file is refused.
    text = read_small_text(file, what=what, max_size=MAX_KEY_FILE, encoding="ascii")
    text = text.strip()
    if text.startswith(("0x", "0X")):
        text = text[2:]
    if len(text) != 64:
        raise ConfigError(
            f"{what} {file} must hold 64 hex digits (a 32-byte key), found {len(text)}"
        )
    try:
        return private_key_from_bytes(bytes.fromhex(text))
    except ValueError:
        raise ConfigError(f"{what} {file} holds non-hex characters") from None
    except CryptoError as exc:
        raise ConfigError(f"{what} {file}: {exc}") from exc


def write_node_key(path: str | os.PathLike[str], key: coincurve.PrivateKey) -> None:
    """Write crash-safely (temp file, fsync, rename), readable by the owner only."""
    file = Path(path)
    write_atomic(
        file,
        (key.secret.hex() + "\n").encode("ascii"),
        step="node-key",
        tmp=file.with_name(file.name + ".tmp"),
        mode=0o600,
    )


def load_or_create_node_key(path: str | os.PathLike[str]) -> tuple[coincurve.PrivateKey, bool]:
    """The key in ``path``; a new one is generated and written if the file is missing.
    Returns ``(key, created)``."""
    if Path(path).exists():
        return load_node_key(path), False
    key = generate_private_key()
    write_node_key(path, key)
    return key, True
