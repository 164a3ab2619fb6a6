"""The closed-loop point a replica runs at for an offered rate, and the TPOT it gives.

The sweep's concurrency table (:func:`backpressure.generator.plan.frame.concurrency_frame`)
lists, per config, ``users`` requests held in flight in a closed loop and what
that gives: ``requests_per_s``, mean ``tpot_ms``, ``tokens_per_user`` (``1000 /
TPOT``), ``ttft_ms``. Read as a load curve:

- A replica offered ``λ`` requests/s runs at **the first row (fewest users)
  whose request throughput reaches ``λ``**: fewer users cannot carry the rate,
  and in steady state the queue holds no more. Past the table's highest
  throughput the server is full and runs as its last row does.
- **The TPOT rate** for a target ``Y`` ms is the highest request throughput of
  the rows before the first one whose TPOT exceeds ``Y``; a rate at or under it
  meets the target, by the rule above. Infinite when every row meets ``Y``
  (even a full server does), NaN when one user already misses it. TPOT rises
  with users in the engine's tables (more sequences share each step); where a
  table is not monotone the rate stops at the first row that misses.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

POINT_COLUMNS = ("users", "tpot_ms", "tokens_per_user", "ttft_ms", "requests_per_s")


def point_at_rate(table: pd.DataFrame, rates: pd.Series) -> pd.DataFrame:
    """Per config id in ``rates`` (index: config id), the table row a replica runs at.

    Returns a frame indexed by config id with :data:`POINT_COLUMNS`; configs
    without a table (not simulated) or with a NaN rate are missing from it.
    """
    wanted = rates.dropna()
    wanted = wanted[wanted.index.isin(table["config_id"])]
    t = table[table["config_id"].isin(wanted.index)].sort_values(
        ["config_id", "users"], kind="stable"
    )
    reach = t.groupby("config_id", sort=False)["requests_per_s"].cummax()
    rate = t["config_id"].map(wanted).astype("float64")
    last = ~t["config_id"].duplicated(keep="last")
    # the first row reaching the rate, else (past the peak) the full server's last row
    hit = (reach >= rate) | last
    first = t[hit].groupby("config_id", sort=True).head(1)
    out = first.set_index("config_id")[list(POINT_COLUMNS)]
    out.index = out.index.astype("string")
    return out


def tpot_rate(table: pd.DataFrame, tpot_ms: float) -> pd.Series:
    """Per config id of ``table``, the highest rate whose table row meets ``tpot_ms`` [req/s]."""
    t = table.sort_values(["config_id", "users"], kind="stable")
    meets = (t["tpot_ms"] <= tpot_ms).astype("int64")
    prefix = meets.groupby(t["config_id"], sort=False).cummin().astype(bool)
    reach = t["requests_per_s"].where(prefix).groupby(t["config_id"], sort=True).max()
    every = prefix.groupby(t["config_id"], sort=True).all()
    out = reach.where(~every, np.inf).astype("float64")
    out.index = out.index.astype("string")
    return out
