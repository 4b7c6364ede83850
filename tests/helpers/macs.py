"""The multiply-adds of a BERT-like encoder classifier worked out from its config: the figure
``workbench.perf.work.graph_work`` must find in its graph."""


def config_macs(hidden: int, intermediate: int, layers: int, batch: int, seq: int, num_labels: int = 2,
                pooler: bool = True) -> int:
    """Per layer Q, K, V, O projections, the FFN, QK^T and AV; the pooler (first token) and the classifier."""
    tokens = batch * seq
    per_layer = tokens * (4 * hidden * hidden + 2 * hidden * intermediate) + 2 * batch * seq * seq * hidden
    head = (batch * hidden * hidden if pooler else 0) + batch * hidden * num_labels
    return layers * per_layer + head
