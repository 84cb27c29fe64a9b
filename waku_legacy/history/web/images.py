"""Image bytes a stranger sent, served only when they are what a browser can safely show.

The type is decided by the bytes' magic numbers, never by a declared type or a file name
(status-go's ``images.GetMimeType`` sniffs the same four signatures; anything else, SVG above
all, which is a script-capable document, is refused). A size cap bounds what is served.
The answer's headers carry the sniffed type, ``X-Content-Type-Options: nosniff`` (the browser
must not second-guess it) and ``Content-Disposition: inline``.
"""

from __future__ import annotations

from dataclasses import dataclass

from waku_legacy.errors import DecodeError, LimitExceeded

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGE_BYTES",
    "SniffedImage",
    "image_headers",
    "sniff_image",
    "sniff_image_type",
]

#: status-go caps a chat image at 1 MiB after resizing (``images.MaxSize`` ~ 1 MB is the
#: resize target); a bit of margin for what older clients sent.
MAX_IMAGE_BYTES = 2 * 1024 * 1024

#: image_type -> Content-Type
IMAGE_TYPES = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "gif": "image/gif",
}


@dataclass(frozen=True, slots=True)
class SniffedImage:
    image_type: str  # a key of IMAGE_TYPES
    data: bytes

    @property
    def content_type(self) -> str:
        return IMAGE_TYPES[self.image_type]


def sniff_image_type(data: bytes) -> str | None:
    """``"jpeg"``, ``"png"``, ``"webp"`` or ``"gif"`` from the magic bytes, else None."""
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None


def sniff_image(data: bytes, *, max_size: int = MAX_IMAGE_BYTES) -> SniffedImage:
    """The image, or a typed error saying why it is not served."""
    if len(data) > max_size:
        raise LimitExceeded("image", f"{len(data)} bytes, over the {max_size}-byte cap")
    kind = sniff_image_type(data)
    if kind is None:
        head = data[:16].hex()
        raise DecodeError(
            "image", f"the bytes are not JPEG, PNG, WebP or GIF (they begin {head or 'empty'})"
        )
    return SniffedImage(kind, data)


def image_headers(image: SniffedImage) -> dict[str, str]:
    """The headers an image answer carries (besides the viewer's own)."""
    return {
        "Content-Type": image.content_type,
        "X-Content-Type-Options": "nosniff",
        "Content-Disposition": "inline",
        "Content-Length": str(len(image.data)),
    }
