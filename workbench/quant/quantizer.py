"""The one place a configuration is quantized with its worst nodes (by local SQNR) left in FP32, for every task."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

from .config import QuantConfig, QuantizeError
from .quantize import quantize_graph
from .sqnr import node_errors, worst_nodes

Feeds = list[dict]


def excluding(cfg: QuantConfig, nodes: Sequence[str], name: Optional[str] = None) -> QuantConfig:
    """``cfg`` leaving ``nodes`` in FP32 too, with nothing more to rank (``exclude_worst`` 0)."""
    kept = tuple(dict.fromkeys([*cfg.nodes_to_exclude, *nodes]))
    return dataclasses.replace(cfg, nodes_to_exclude=kept, exclude_worst=0, name=cfg.name if name is None else name)


def feed_rows(feeds: Feeds) -> int:
    """How many texts a list of feeds holds (the first input's rows, batch by batch)."""
    return sum(len(next(iter(f.values()))) for f in feeds)


class Quantized(NamedTuple):
    path: Path  # the quantized graph
    float_path: Path  # the FP32 graph its node names refer to (static: the pre-processed copy)
    config: QuantConfig  # the configuration used: exclude_worst's choice is in its nodes_to_exclude
    note: str  # what exclude_worst left in FP32 and why ("" without it)


@dataclasses.dataclass
class Quantizer:
    """Quantizes one model's graphs again and again: ``source(cfg)`` the FP32 graph, ``calibration(cfg)`` static
    quantization's batches, ``rank_feeds()`` the batches nodes are ranked on ([]: none, ``no_rank_texts`` says why)."""

    source: Callable[[QuantConfig], Path]
    calibration: Callable[[QuantConfig], Optional[Feeds]]
    rank_feeds: Callable[[], Feeds]
    no_rank_texts: str = "excluding the worst nodes ranks them on calibration texts, and none were given"
    _ranked_on: Optional[Feeds] = dataclasses.field(default=None, init=False, repr=False)

    def quantize(self, cfg: QuantConfig, out_path: str | Path) -> Quantized:
        """``cfg`` quantized into ``out_path``; with ``exclude_worst``, then again without its worst nodes."""
        qpath, float_path = quantize_graph(self.source(cfg), cfg, out_path, self.calibration(cfg))
        done = Quantized(qpath, float_path, cfg, "")
        return self.without_worst(done, cfg.exclude_worst, out_path) if cfg.exclude_worst else done

    def without_worst(self, done: Quantized, k: int, out_path: str | Path) -> Quantized:
        """``done``'s configuration again with its ``k`` nodes of lowest local SQNR left in FP32 (the note says which)."""
        worst = self.worst(done.config, done.float_path, done.path, k)
        used = dataclasses.replace(done.config, nodes_to_exclude=tuple(dict.fromkeys([*done.config.nodes_to_exclude, *worst])))
        qpath, float_path = quantize_graph(self.source(used), used, out_path, self.calibration(used))
        return Quantized(qpath, float_path, used, f"left in FP32 the {k} nodes of lowest local SQNR on {self.ranked_on} "
                                                  f"calibration texts: {list(worst)}")

    def worst(self, cfg: QuantConfig, float_path: Path, quant_path: Path, k: int) -> list[str]:
        """The ``k`` quantized nodes of ``quant_path`` with the lowest local SQNR on the ranking batches."""
        if self._ranked_on is None:
            self._ranked_on = list(self.rank_feeds())
        if not self._ranked_on:
            raise QuantizeError(self.no_rank_texts)
        return worst_nodes(node_errors(float_path, quant_path, self._ranked_on, cfg.resolved_op_types()), k, "local")

    @property
    def ranked_on(self) -> int:
        """How many texts the ranking batches hold (0 before the first ranking)."""
        return feed_rows(self._ranked_on or [])
