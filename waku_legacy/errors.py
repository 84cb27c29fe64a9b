"""The package's own error types.

Every decoder and parser raises a subclass of :class:`WakuLegacyError` with a message a
person can act on (what was being read, what is wrong, and where). Library exceptions
(rlp, protobuf, coincurve, pycryptodome) never escape a public function undecorated.
"""

from __future__ import annotations


class WakuLegacyError(Exception):
    """Base class of every error this package raises on purpose."""


class DecodeError(WakuLegacyError):
    """Bytes or text that do not hold what they should.

    ``what`` names the thing being decoded (``"envelope"``, ``"store cursor"``),
    ``reason`` says what is wrong, ``offset`` where (when known).
    """

    def __init__(self, what: str, reason: str, *, offset: int | None = None) -> None:
        self.what = what
        self.reason = reason
        self.offset = offset
        where = f" (at byte {offset})" if offset is not None else ""
        super().__init__(f"malformed {what}: {reason}{where}")


class LimitExceeded(DecodeError):
    """Input that is well-formed but over a documented size or count limit."""


class InvalidTopic(DecodeError):
    """A content topic, pubsub topic or v1 topic that does not parse."""


class InvalidCommunityId(DecodeError):
    """A community id that is not ``0x`` + 66 hex digits of a compressed secp256k1 key."""


class CryptoError(WakuLegacyError):
    """Decryption, authentication or key errors (wrong key, bad tag, invalid point)."""


class SignatureError(CryptoError):
    """A signature that does not parse or does not verify."""


class ConfigError(WakuLegacyError):
    """A configuration file or option that is missing or wrong (names the key)."""


def innermost_error(
    exc: BaseException, expected: tuple[type[BaseException], ...]
) -> BaseException:
    """The error inside the exception groups a task nursery (trio, asyncio) wraps around
    one failure: the first leaf, when every leaf is one of ``expected``; else ``exc``.

    One failed dial in a trio nursery arrives as an ExceptionGroup; reported as such it
    looks like a bug (a page of traceback) though it is one clear error, such as an
    unreachable peer."""
    leaves: list[BaseException] = []

    def walk(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                walk(inner)
        else:
            leaves.append(error)

    walk(exc)
    if leaves and all(isinstance(leaf, expected) for leaf in leaves):
        return leaves[0]
    return exc
