"""2,300 `bytearray(b)` calls on one memoized 900 KiB bytes (2.1 MB of pickle, 2 GB in
pickle.loads): accepted by `check --policy data` on 38ee7f9 (the attacker review's case)."""
from gen_data import bytearray_memo


def make():
    return bytearray_memo(2300).data
