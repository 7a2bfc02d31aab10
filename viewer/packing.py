"""A component's data as Streamlit passes it for nothing: its lists and dicts as JSON text.

Streamlit looks at every value of a component's data that is not a plain scalar to see whether it is a data
frame (`dataframe_util.is_dataframe_like`), and to see it imports NumPy, pandas and PyArrow: on the first
page of a server, 0.85 s of the Episodes table's first paint (py-spy of `streamlit run viewer/app.py`, the
sort's two-item list), and nothing else on that page needs them. Text it passes as it is; the browser's side
parses it back (`UNPACK_JS`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PACKED = "_json"
"""The data's key naming (comma-separated) the keys held as JSON text."""


def pack(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with each list, tuple or dict value as JSON text, named under `PACKED`."""
    out: dict[str, Any] = {}
    packed = []
    for k, v in data.items():
        if isinstance(v, list | tuple | dict):
            out[k] = json.dumps(v, separators=(",", ":"))
            packed.append(k)
        else:
            out[k] = v
    out[PACKED] = ",".join(packed)
    return out


UNPACK_JS = f"""
function unpack(data) {{
  const out = Object.assign({{}}, data);
  for (const k of String(data.{PACKED} || '').split(',')) if (k) out[k] = JSON.parse(data[k]);
  delete out.{PACKED};
  return out;
}}
"""
"""`unpack(component.data)`: the data as it was before `pack`, in a component's script."""
