"""Search spaces: parameters, safe constraint expressions, vectorised enumeration, neighbourhoods."""

from adaptune.space.constraints import CallableConstraint, Constraint, parse_constraint
from adaptune.space.errors import ConstraintError
from adaptune.space.neighbours import METHODS as NEIGHBOUR_METHODS
from adaptune.space.params import Param
from adaptune.space.space import Space
from adaptune.space.values import parse_values

__all__ = ["NEIGHBOUR_METHODS", "CallableConstraint", "Constraint", "ConstraintError", "Param", "Space",
           "parse_constraint", "parse_values"]
