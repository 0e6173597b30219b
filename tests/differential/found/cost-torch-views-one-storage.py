"""torch.save of 64 views of one 256 KiB storage (262 KB): `convert` writes each view whole,
16 MiB (64 MiB for 256 views; 17 GB from 64 views of a 256 MiB storage) on 38ee7f9."""
from gen_torch import views_of_one_storage


def make():
    return views_of_one_storage(64).data
