"""tessera.vision.models.feature_extraction — torchvision's names. Both functions trace the model
with torch.fx, which Tessera does not have: they raise NotImplementedError naming the limit
(timm falls back to its hook-based feature extraction when asked for features_only)."""

__all__ = ["create_feature_extractor", "get_graph_node_names"]


def _no_fx(what):
    return NotImplementedError(
        "torchvision.models.feature_extraction.%s: needs torch.fx symbolic tracing, which Tessera "
        "does not have; use forward hooks (register_forward_hook) or the model's own "
        "feature methods (timm: features_only=True with feature_cls='hook')" % what)


def create_feature_extractor(model, return_nodes=None, train_return_nodes=None,
                             eval_return_nodes=None, tracer_kwargs=None,
                             suppress_diff_warning=False, concrete_args=None):
    """not supported (torch.fx)"""
    raise _no_fx("create_feature_extractor")


def get_graph_node_names(model, tracer_kwargs=None, suppress_diff_warning=False,
                         concrete_args=None):
    """not supported (torch.fx)"""
    raise _no_fx("get_graph_node_names")
