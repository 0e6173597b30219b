"""`Kwargs(d)` called 18,500 times on one memoized 18,500-key dict (329 KB): accepted by
`check --policy mitogen` on 38ee7f9; a Mitogen parent spends minutes and gigabytes on it."""
from gen_mitogen import kwargs_payload


def make():
    return kwargs_payload(18500)
