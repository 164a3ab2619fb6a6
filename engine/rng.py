"""The one source of randomness: mulberry32, bit-exact with the JavaScript original.

The JavaScript function everyone copies is::

    function mulberry32(a) {
      return function() {
        var t = a += 0x6D2B79F5;
        t = Math.imul(t ^ t >>> 15, t | 1);
        t ^= t + Math.imul(t ^ t >>> 7, t | 61);
        return ((t ^ t >>> 14) >>> 0) / 4294967296;
      }
    }

``Math.imul`` keeps the low 32 bits of the product, and every ``^``, ``|`` and
``+`` above wraps at 32 bits; Python integers do not wrap, so each step is masked
explicitly. The state is a counter (``a`` grows by a constant each draw) and the
output is a hash of it, so a block of draws can be computed at once with numpy's
unsigned integers and still match the scalar sequence bit for bit.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.jit import compiled

MASK32 = 0xFFFFFFFF
GOLDEN_GAMMA = 0x6D2B79F5
TWO_POW_32 = 4294967296.0


def _hash(state: int) -> float:
    """The draw for counter ``state``.

    ``(a * b) & MASK32`` is ``Math.imul``'s low 32 bits. Compiled, the 64-bit
    product of two 32-bit values wraps, and its low 32 bits are still exact.
    """
    t = state
    t = ((t ^ (t >> 15)) * (t | 1)) & MASK32
    t ^= (t + (((t ^ (t >> 7)) * (t | 61)) & MASK32)) & MASK32
    return ((t ^ (t >> 14)) & MASK32) / TWO_POW_32


# the draw for one counter, for compiled loops (engine/serving/breaking.py: Epochs)
draw_at = compiled(_hash, "always")


class Mulberry32:
    """A seeded stream of floats in [0, 1); call it for one draw.

    Parameters
    ----------
    seed : int
        Any integer; only its low 32 bits matter, as in JavaScript.

    Notes
    -----
    The object holds the only state: the 32-bit counter. There is no module-level
    generator, so two streams never interfere.

    Examples
    --------
    >>> rng = Mulberry32(0)
    >>> rng(), rng()
    (0.26642920868471265, 0.0003297457005828619)
    """

    __slots__ = ("_state",)

    def __init__(self, seed: int) -> None:
        self._state = seed & MASK32

    def __call__(self) -> float:
        """Return the next draw in [0, 1)."""
        self._state = (self._state + GOLDEN_GAMMA) & MASK32
        return _hash(self._state)

    def block(self, n: int) -> npt.NDArray[np.float64]:
        """Return the next ``n`` draws as an array, exactly as ``n`` calls would.

        Parameters
        ----------
        n : int
            Number of draws [-].

        Returns
        -------
        numpy.ndarray
            float64 array of shape ``(n,)``.
        """
        if n <= 0:
            return np.zeros(0, dtype=np.float64)
        mask = np.uint64(MASK32)
        steps = np.arange(1, n + 1, dtype=np.uint64)
        # n * gamma stays below 2**64 for any n we could hold in memory.
        t = (np.uint64(self._state) + steps * np.uint64(GOLDEN_GAMMA)) & mask
        self._state = int(t[-1])
        t = ((t ^ (t >> np.uint64(15))) * (t | np.uint64(1))) & mask
        t ^= (t + (((t ^ (t >> np.uint64(7))) * (t | np.uint64(61))) & mask)) & mask
        # numpy's stubs lose the dtype through the mixed-width shifts above
        out: npt.NDArray[np.uint64] = (t ^ (t >> np.uint64(14))) & mask
        return out.astype(np.float64) / TWO_POW_32


def mulberry32(seed: int) -> Mulberry32:
    """Return a zero-argument callable giving mulberry32 floats in [0, 1).

    Parameters
    ----------
    seed : int
        Seed; the low 32 bits are used.

    Returns
    -------
    Mulberry32
        The stream; ``rng()`` draws one float, ``rng.block(n)`` draws ``n``.

    Examples
    --------
    >>> rng = mulberry32(42)
    >>> rng()
    0.6011037519201636
    """
    return Mulberry32(seed)
