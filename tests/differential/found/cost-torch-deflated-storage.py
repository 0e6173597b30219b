"""A torch checkpoint whose one storage entry (1 GiB of zeros) is deflated: a 1 MB file that
makes torch.load allocate 1 GiB; clean on 38ee7f9."""
from gen_torch import deflated_storage


def make():
    return deflated_storage(1024).data
