"""Former home of the model codec, now :mod:`polydom.index.storage.modelcodec`.

Kept so that existing imports of ``polydom.index.modelcodec`` (the expansion cache, the
classifier's stored state) keep working; new code imports the storage modules.
"""

from .storage.errors import ModelIntegrityError, ModelLoadError, UnsupportedModelError, UntrustedModelError
from .storage.modelcodec import (
    decode_model, default_trusted_types, digest, encode_model, normalize_trusted, payload_types,
)

__all__ = [
    "UnsupportedModelError", "ModelLoadError", "ModelIntegrityError", "UntrustedModelError",
    "default_trusted_types", "normalize_trusted", "payload_types", "encode_model", "decode_model", "digest",
]
