"""A torch checkpoint whose data.pkl is Counter([k * (2**61 - 1) for k in 1..16384]) (196 KB):
every key hashes to 0 in CPython, so torch.load's Counter is quadratic; clean on 38ee7f9."""
from gen_torch import counter_collide


def make():
    return counter_collide(16384).data
