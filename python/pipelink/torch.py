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

from . import ContractViolationError, IndexOutOfRangeError
from . import aggregate as _aggregate

__all__ = ["aggregate", "reference"]


def reference(node_features: torch.Tensor, source: torch.Tensor, destination: torch.Tensor,
              edge_weight: torch.Tensor) -> torch.Tensor:
    """The reference itself, as users run it today (three ops, two ``[E, F]`` temporaries).

    Here so that a comparison needs no copy of it: the tests and ``bench/compare_torch.py``
    (eager and under ``torch.compile``) time and check against this one.
    """
    messages = node_features[source] * edge_weight[:, None]
    transformed = torch.tanh(messages)
    output = torch.zeros_like(node_features)
    output.index_add_(0, destination, transformed)
    return output


def aggregate(node_features: torch.Tensor, source: torch.Tensor, destination: torch.Tensor,
              edge_weight: torch.Tensor) -> torch.Tensor:
    """``zeros_like(node_features).index_add_(0, destination, tanh(node_features[source] * edge_weight[:, None]))``, fused.

    Takes what the reference takes: weights broadcast from one value (``torch.ones(1).expand(E)``),
    strided indices, int32 beside int64 indices, float32 weights with float64 features (the
    reference's product is float64 then, like its output), a column-strided ``node_features``
    (a transposed view), and sources from ``-N`` to ``-1``, read as ``N`` less (Python's indexing,
    as the reference's ``node_features[source]`` reads them). Each of these costs a copy.
    """
    try:
        return _aggregate(node_features, source, destination, edge_weight, transform="tanh")
    except IndexOutOfRangeError as e:
        # The reference reads node_features[source], which takes -N <= s < 0 as s + N (Python's
        # indexing), where the op's contract is [0, N); its index_add_ refuses a negative
        # destination, as the op does. Nothing was written: wrap them (a copy) and go again. Off
        # the common path, like the fallback below (a probe, session 53).
        if e.port != "src":
            raise
        n = node_features.shape[0]
        bad = torch.nonzero((source < -n) | (source >= n))
        if bad.numel():  # the reference raises too: named in the drop-in's range, not the op's [0, N)
            i = int(bad[0, 0])
            v = int(source[i])
            raise IndexOutOfRangeError(
                f"op 'aggregate': index out of range in port 'src': element {i} is {v}, valid range is [{-n}, {n}) "
                "(the reference's, with negative sources read as N less)", op="aggregate", port="src", position=i,
                value=v, bound=n) from None
        return aggregate(node_features, torch.where(source < 0, source + n, source), destination, edge_weight)
    except ContractViolationError as e:
        if e.port == "x" and e.field == "contiguity" and node_features.dim() == 2:
            # A column-strided x (a transposed view, say): the reference gathers rows from it as
            # from any tensor; the op reads rows with unit inner stride. A copy, as above.
            return aggregate(node_features.contiguous(), source, destination, edge_weight)
        # The fused op's contract is narrower than the reference's on these three ports; the
        # error came before anything ran, so bring them into its form (copies) and go again. Off
        # the common path: a call that fits the contract pays nothing for this.
        # Only integer indices and float weights: the reference refuses float indices and reads
        # bool/uint8 ones as masks, which .to(int64) would turn into indices (a review, session 46).
        ints = (torch.int32, torch.int64)
        if e.port not in ("src", "dst", "w") or edge_weight is None or source.dtype not in ints or \
                destination.dtype not in ints or not edge_weight.is_floating_point():
            raise
        index = torch.int64 if torch.int64 in (source.dtype, destination.dtype) else source.dtype
        # Weights promote to the features' dtype only where the reference's product would keep
        # it (float32 weights with float64 features); float64 weights with float32 features fail
        # in the reference's index_add_, and are refused here as before.
        wdtype = node_features.dtype if torch.promote_types(node_features.dtype, edge_weight.dtype) == \
            node_features.dtype else edge_weight.dtype
        fixed = (source.to(index).contiguous(), destination.to(index).contiguous(),
                 edge_weight.to(wdtype).contiguous())
        if all(a is b for a, b in zip(fixed, (source, destination, edge_weight))):
            raise
        # Through the drop-in again, not the op: negative sources in a call that also needed these
        # copies were refused (a review, session 53). The copies meet the contract, so this
        # branch is not taken twice.
        return aggregate(node_features, *fixed)
