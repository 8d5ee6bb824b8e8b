"""tessera.distributions — torch.distributions' Categorical and Normal (issue 53: pytorch/examples'
reinforce.py / actor_critic.py sample actions from a Categorical and train on its log_prob), with
PyTorch's formulas: probs normalised over the last dim, logits made log-probabilities, samples
drawn by multinomial (with replacement), log_prob gathered from the logits (differentiable)."""
from .distribution import Distribution
from .categorical import Categorical
from .normal import Normal

__all__ = ["Distribution", "Categorical", "Normal"]
