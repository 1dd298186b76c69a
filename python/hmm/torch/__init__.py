# SPDX-License-Identifier: MIT
"""hmm.torch — PyTorch over hmm: an AdamW whose master weights, m and v
live in hmm tensors (adamw.py), and activation offload through autograd's
saved-tensor hooks (activations.py)."""
from .activations import offload_activations
from .adamw import AdamW

__all__ = ["AdamW", "offload_activations"]
