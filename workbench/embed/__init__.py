"""Sentence-embedding models (sentence-transformers folders): recognise, export with pooling and
normalization in the graph, fuse and quantize with the workbench's graph and quantization functions,
and measure what quantization does to search, slice by slice.

- :mod:`.folder`: ``read_folder`` -> :class:`EmbedFolder` (modules, pooling, normalization)
- :mod:`.export`: ``run_embed_export`` -> :class:`EmbedExportResult` (validated against ``SentenceTransformer.encode``)
- :mod:`.variants`: ``build_variants`` (fused, one graph per quantization preset, optional node exclusion)
- :mod:`.encode`: :class:`OnnxEncoder` (texts in, embeddings out, in ONNX Runtime), and ``time_encoders``: its
  calls and ``SentenceTransformer.encode`` timed by :func:`workbench.perf.speed.time_callables`
- :mod:`.retrieval`: the built-in task and a user's pairs; NDCG@10, recall@10, MRR@10 per slice
- :mod:`.quality`: agreement without labels (cosine, neighbour overlap@10)
- :mod:`.evaluate`: every variant against FP32, the budget in NDCG@10 terms
- :mod:`.search`: the search's baseline in NDCG@10 terms (:class:`~workbench.quant.search.ScoredBaseline`)
- :mod:`.report`: its blocks of summary.json and the figures of its report sections
- :mod:`.audit`: ``run_embed_audit`` -> report.html and summary.json
- :mod:`.stages`: the embedding task's export, quantize, evaluate, search and report (the ``embed-audit`` route)
"""

from .folder import (CLASSIFICATION, EMBEDDING, TASKS, EmbedError, EmbedFolder, check_task_of, is_sentence_transformers_folder,
                     read_folder, task_of_folder)

__all__ = ["CLASSIFICATION", "EMBEDDING", "TASKS", "EmbedError", "EmbedFolder", "check_task_of",
           "is_sentence_transformers_folder", "read_folder", "task_of_folder"]
