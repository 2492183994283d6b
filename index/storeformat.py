"""Former home of the stored record layout, now :mod:`polydom.index.storage.records`.

Kept so that existing imports of ``polydom.index.storeformat`` keep working; new code imports
the storage modules.
"""

from .storage.errors import IndexFormatError, IndexVersionError, StoreError
from .storage.records import (
    DATABASES, FORMAT_VERSION, MODEL_KEY_BYTES, STATE_DIGEST_KEY, STORE_KEY, EncodedState, decode_state,
    encode_state, mask_of, model_key, state_digest, store_record,
)

__all__ = [
    "StoreError", "IndexFormatError", "IndexVersionError",
    "FORMAT_VERSION", "STORE_KEY", "DATABASES", "MODEL_KEY_BYTES", "STATE_DIGEST_KEY",
    "model_key", "mask_of", "EncodedState", "encode_state", "store_record", "state_digest", "decode_state",
]
