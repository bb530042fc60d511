"""Launch-configuration prediction from kernel source, trained on our H100 measurements of LS-CAT.

``launch_config(source, name, args)`` returns a thread-block shape ``(bx, by)`` for a CUDA kernel before
any tuning; ``first_config(space, shape)`` turns it into the nearest valid configuration of a Space, and
``with_predicted_default(space, shape)`` makes that the Space's default (the configuration tune()
reports against and a strategy may start from); ``launch_prior(space, source, name)`` ranks every
configuration of a space for the ``warm`` strategy (the model's whole ranking of the 20 shapes);
``launch_first(space, source, name)`` sets every parameter of a first configuration (model + hand rules).
See docs/predict.md for the data, metric and scores.
"""

from __future__ import annotations

from adaptune.predict.corpus import LSCAT_SIZES, SHAPES, CorpusError
from adaptune.predict.metric import random_score, relative_performance, score
from adaptune.predict.predictor import first_config, launch_config, shape_scores, with_predicted_default
from adaptune.predict.prior import first_pick, launch_first, launch_prior, space_prior

__all__ = ["LSCAT_SIZES", "SHAPES", "CorpusError", "first_config", "first_pick", "launch_config", "launch_first",
           "launch_prior",
           "random_score", "relative_performance", "score", "shape_scores", "space_prior", "with_predicted_default"]
