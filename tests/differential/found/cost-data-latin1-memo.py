"""2,300 `_codecs.encode(t, 'latin1')` calls on one memoized text of 460,800 characters
(0.9 MB of pickle, 1 GB in pickle.loads): accepted by `check --policy data` on 38ee7f9."""
from gen_data import latin1_memo


def make():
    return latin1_memo(2300).data
