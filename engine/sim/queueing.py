"""Queueing pieces of the tick simulation: the M/M/1 curve and the disciplines.

The cohort queue that holding disciplines keep is in :mod:`engine.sim.cohorts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

# Utilization at which the M/M/1 factor is capped. Beyond it the fluid backlog of
# the tick loop carries the waiting explicitly; the closed form would diverge.
RHO_CAP = 0.99


def mm1_factor(rho: Array | float) -> Array:
    """M/M/1 slowdown: mean time in system over service time, ``1 / (1 - rho)``.

    Parameters
    ----------
    rho : numpy.ndarray or float
        Utilization [-], clipped to [0, ``RHO_CAP``].

    Returns
    -------
    numpy.ndarray
        The factor [-]: 1 when idle, 10 at 90 %, 20 at 95 %, 100 at the cap.

    Notes
    -----
    In an M/M/1 queue the time in system is exponential with mean
    ``S / (1 - rho)``, so every quantile scales by this factor too.

    References
    ----------
    L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975, §3.2.

    Examples
    --------
    >>> float(mm1_factor(0.5))
    2.0
    """
    r = np.clip(np.asarray(rho, dtype=np.float64), 0.0, RHO_CAP)
    return 1.0 / (1.0 - r)


class Discipline(StrEnum):
    """What a node does with work it cannot serve this tick."""

    SHED = "shed"
    BUFFER = "buffer"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class DisciplineRule:
    """Behaviour of one discipline.

    Attributes
    ----------
    holds : bool
        Keeps unserved work as backlog for later ticks (up to the node's max depth).
    overflow : {"drop", "refuse"}
        drop: work beyond the intake room is lost here. refuse: it is turned away
        at intake and stays with the upstream node (or is lost at the source).
    ages_out : bool
        Abandons queued work older than the node's max age.
    """

    holds: bool
    overflow: Literal["drop", "refuse"]
    ages_out: bool


# The registry: a literal mapping, nothing registers itself on import.
DISCIPLINES: dict[Discipline, DisciplineRule] = {
    Discipline.SHED: DisciplineRule(holds=False, overflow="drop", ages_out=False),
    Discipline.BUFFER: DisciplineRule(holds=True, overflow="drop", ages_out=True),
    Discipline.BLOCK: DisciplineRule(holds=True, overflow="refuse", ages_out=True),
}
