"""Cryptographic primitives shared by every protocol module (one place each)."""
