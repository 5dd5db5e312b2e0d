"""The ROS 2 side of WorldSample: topics in, actions out, episodes into the store.

Rooms (one job each):
- `codec/`      CDR encode/decode of the ROS messages the bridge uses (one codec, both transports)
- `transport/`  `dds` (cyclonedds-python, ROS 2 wire conventions) and `rclpy` (inside ROS 2)
- `core/`       transport-independent: stream alignment, action limits, episode state machine,
                watchdog, control loop, recorder into the episode store
- `profile.py`  the robot profile (YAML): topics, types, rates, cameras, limits
- `sim_robot.py` the simulated arm published as a ROS 2 robot over DDS
- `bridge.py`   the bridge process; `bag.py` rosbag2 import/export (`bag_export.py`, `bag_import.py`,
                shared bits in `bag_common.py`)

Imports only the store and the policy registry from `worldsample` (no Ray, no torch).
See docs/bridge.md.
"""
