"""The same reply as cost-mitogen-kwargs-memo.py in a Mitogen frame, through `filter
--mitogen`: the parent loads the filter's canonical rewrite."""
from gen_mitogen import frame, kwargs_payload


def make():
    return frame(kwargs_payload(18500))
