"""The decode loop's key/value cache: preallocated buffers written in place, and one-row views
of them for ragged prefills (the transformers `Cache` protocol, the parts our loop uses)."""

from __future__ import annotations

import torch

from pipeline.llm.cancel import checkpoint


class KVCache:
    """Preallocated key/value buffers written in place (no per-step concatenation).

    Sliding-window layers get only the columns from `sliding_start` on: the caller computes
    the first column any row still sees through the window and slices its mask the same way.
    """

    is_compileable = False

    def __init__(self, config, capacity: int, dtype=torch.float32, device="cpu") -> None:
        self.capacity = capacity
        self.layers = config.num_hidden_layers
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads
        )
        self.dtype, self.device = dtype, device
        self.sliding = [t == "sliding_attention" for t in getattr(config, "layer_types", [])]
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.length = 0
        self.sliding_start = 0

    def reserve(self, batch: int) -> None:
        """Allocate zeroed buffers (columns never written stay finite behind the mask)."""
        shape = (batch, self.kv_heads, self.capacity, self.head_dim)
        for i in range(self.layers):
            checkpoint()
            self.keys[i] = torch.zeros(shape, dtype=self.dtype, device=self.device)
            self.values[i] = torch.zeros(shape, dtype=self.dtype, device=self.device)

    def update(self, k: torch.Tensor, v: torch.Tensor, layer_idx: int, *args, **kwargs):
        return self.write(slice(None), self.length, self.sliding_start, k, v, layer_idx)

    def write(self, rows: slice, length: int, sliding_start: int, k, v, layer_idx: int):
        """Store k/v of `rows` from column `length` on; return what attention reads back."""
        end = length + k.shape[2]
        self.keys[layer_idx][rows, :, length:end] = k
        self.values[layer_idx][rows, :, length:end] = v
        sliding = layer_idx < len(self.sliding) and self.sliding[layer_idx]
        start = sliding_start if sliding else 0
        return self.keys[layer_idx][rows, :, start:end], self.values[layer_idx][rows, :, start:end]

    def advance(self, n: int) -> None:
        self.length += n

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def select(self, rows: torch.Tensor) -> None:
        """Keep (or repeat) batch rows: `rows` indexes the current batch."""
        for d in (self.keys, self.values):
            for i, t in d.items():
                checkpoint()  # n copies of a long cache are GBs: a cancelled request stops here
                d[i] = t.index_select(0, rows.to(t.device))


class RowView:
    """One row of a KVCache as a batch-1 cache: writes land in the parent's buffers."""

    is_compileable = False

    def __init__(self, parent: KVCache, row: int, length: int) -> None:
        self.parent, self.row, self.length = parent, row, length
        self.sliding_start = 0

    def update(self, k: torch.Tensor, v: torch.Tensor, layer_idx: int, *args, **kwargs):
        rows = slice(self.row, self.row + 1)
        return self.parent.write(rows, self.length, self.sliding_start, k, v, layer_idx)

    def advance(self, n: int) -> None:
        self.length += n

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length
