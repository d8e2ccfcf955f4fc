"""Drop-in replacement for the PyTorch reference ``aggregate``.

The reference (three ops, two ``[E, F]`` temporaries)::

    def aggregate(node_features, source, destination, edge_weight):
        messages = node_features[source] * edge_weight[:, None]
        transformed = torch.tanh(messages)
        output = torch.zeros_like(node_features)
        output.index_add_(0, destination, transformed)
        return output

becomes ``from pipelink.torch import aggregate``: same signature, same result within the
PROTOCOL.md tolerance, no ``[E, F]`` tensor, deterministic.
"""

from __future__ import annotations

import torch

from . import aggregate as _aggregate

__all__ = ["aggregate"]


def aggregate(node_features: torch.Tensor, source: torch.Tensor, destination: torch.Tensor,
              edge_weight: torch.Tensor) -> torch.Tensor:
    """``zeros_like(node_features).index_add_(0, destination, tanh(node_features[source] * edge_weight[:, None]))``, fused."""
    return _aggregate(node_features, source, destination, edge_weight, transform="tanh")
