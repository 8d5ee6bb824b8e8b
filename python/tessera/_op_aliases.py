"""PyTorch's long spellings of the comparison and arithmetic functions at the top level
(torch.greater is torch.gt, ...): the same functions under the other names, as in PyTorch.
transformers' mixture-of-experts layers (Mixtral, Qwen2-MoE) call torch.greater (issue 75)."""

ALIASES = {"greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
           "not_equal": "ne", "subtract": "sub", "divide": "div"}


def install(g):
    """adds each alias to tessera's namespace g where it is missing (before _out's install, which
    gives subtract and divide out=)"""
    for alias, name in ALIASES.items():
        if alias not in g and name in g:
            g[alias] = g[name]
