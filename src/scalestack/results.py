"""The shape every analysis result shares: read-only data with `.to_dict()`, `.to_json()`,
`.to_frame()`.

Analyses follow one pattern (scikit-learn's): parameters in, one call on a Trace, a frozen
result out. Results never change after they are made, so reports can render them in any
order and tests can run every result through the same checks.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np


def jsonable(value: Any) -> Any:
    """Plain JSON types for NumPy scalars/arrays, dataclasses, enums and nested containers."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return jsonable(value.to_dict())
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if hasattr(value, "name") and hasattr(value, "value") and not isinstance(value, (str, int)):
        return value.name.lower()
    return value


class Result:
    """Base for analysis results (frozen dataclasses).

    Subclasses implement `to_dict()` (JSON-ready, units in key names: `_ns`, `_s`, `_pct`)
    and `rows()` (one dict per table row, for `to_frame`).
    """

    kind: str = "result"

    def to_dict(self) -> dict[str, Any]:
        return jsonable({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})  # type: ignore[arg-type]

    def to_json(self, indent: int | None = 2) -> str:
        # jsonable again: a subclass's own to_dict may hold NaN (written as null) or NumPy values
        return json.dumps(jsonable({"kind": self.kind, **self.to_dict()}), indent=indent, allow_nan=False)

    def rows(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def to_frame(self):
        """The result's main table as a pandas DataFrame (pandas is optional)."""
        import pandas as pd

        return pd.DataFrame(self.rows())
