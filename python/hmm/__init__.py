# SPDX-License-Identifier: MIT
"""hmm — swap-aware tensors across device memory, host DRAM and an NVMe
store (libhmm), for PyTorch and numpy trainers.

    ctx = hmm.Context(store="/nvme/s", store_size="8G", host_budget="1G")
    t = ctx.tensor("w", (1024, 1024), "float32")
    with t.map("host", "rw") as x:    # a torch.Tensor, zero-copy
        x.fill_(1)
    t.evict("host")                   # to the store, asynchronously

hmm.torch holds the offloaded AdamW and activation offload;
`python3 -m hmm.bench` compares them with plain PyTorch.  Errors raise
OSError(errno, detail).
"""
from ._lib import lib_path, size_parse
from .context import Context, Tensor, DTYPES

__all__ = ["Context", "Tensor", "DTYPES", "lib_path", "size_parse"]
