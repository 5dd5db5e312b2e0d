"""Numeric vectors as std_msgs multi-arrays: the action and `vectors` streams on the wire."""

from __future__ import annotations

import numpy as np

from robot_bridge.codec.messages import Float32MultiArray, Float64MultiArray, MultiArrayDimension, MultiArrayLayout


def array_msg(typename: str, values: np.ndarray, label: str) -> Float32MultiArray | Float64MultiArray:
    """A one-dimension Float32MultiArray or Float64MultiArray (by `typename`) holding `values`."""
    cls = Float32MultiArray if typename.endswith("Float32MultiArray") else Float64MultiArray
    dim = MultiArrayDimension(label=label, size=len(values), stride=len(values))
    return cls(layout=MultiArrayLayout(dim=[dim]), data=np.asarray(values))
