"""Sentence-embedding models (sentence-transformers folders): export, fuse, quantize, and measure what
quantization does to search.

- :mod:`.folder`: ``read_folder`` -> :class:`EmbedFolder`
- :mod:`.export`: ``run_embed_export`` (validated against ``SentenceTransformer.encode``)
- :mod:`.variants`: ``build_variants`` (fused, one graph per preset)
- :mod:`.encode`: :class:`OnnxEncoder` and ``time_encoders``
- :mod:`.retrieval`: the built-in task and a user's pairs; NDCG@10, recall@10, MRR@10 per slice
- :mod:`.quality`: agreement without labels
- :mod:`.evaluate`: every variant against FP32, the budget
- :mod:`.search`: the search's baseline in NDCG@10 terms
- :mod:`.report`: summary.json blocks and figures
- :mod:`.audit`: ``run_embed_audit`` -> report.html and summary.json
- :mod:`.stages`: the ``embed-audit`` route's stages
"""

from .folder import CLASSIFICATION, EMBEDDING, TASKS, EmbedError, EmbedFolder, check_task_of, read_folder, task_of_folder

__all__ = ["CLASSIFICATION", "EMBEDDING", "TASKS", "EmbedError", "EmbedFolder", "check_task_of", "read_folder", "task_of_folder"]
